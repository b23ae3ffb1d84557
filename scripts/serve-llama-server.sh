#!/usr/bin/env bash
# Serve a small real model with llama.cpp's native OpenAI-compatible `llama-server`.
#
#   scripts/serve-llama-server.sh MODEL [HOST] [PORT]
#
# MODEL is `smollm2`, `gemma3` or a path to a .gguf file, as for scripts/serve-llama.sh
# (the two named models come from the llama-cpp-python venv of scripts/ci/llama.sh).
# HOST defaults to 127.0.0.1, PORT to 8080.  The model is served under the name MODEL.
#
# The binary is the one scripts/ci/llama.sh builds into the llama venv
# (${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}/bin/llama-server, from the
# llama.cpp tree of llama-cpp-python's source distribution); run that first, or name
# another binary with AGENT_EVAL_LLAMA_SERVER.  Launched with --jinja (the model's chat template renders the tools and
# the server parses the calls; a template that does not render tools, like both models
# here, gets no tools at all: docs/servers.md) and one slot (-np 1: the whole context for
# one conversation, the next request reuses its prefix).  Extra knobs: AGENT_EVAL_LLAMA_CTX (context, default
# 8192), AGENT_EVAL_LLAMA_THREADS (default 1, for generation and prompt processing: two
# servers share a 2-core CI machine), AGENT_EVAL_CHAT_TEMPLATE (a Jinja chat template file
# passed as --chat-template-file instead of the GGUF's own; scripts/chat-templates/
# chatml-tools.jinja renders tools in the Hermes / Qwen 2.5 format, which llama-server
# parses into tool calls: the interop tests serve both models with it),
# AGENT_EVAL_LLAMA_JINJA=0 (serve without the jinja template engine: `--no-jinja` where the
# build has it, else no `--jinja`; llama-server then answers every request that offers
# tools with a 500 "tools param requires --jinja flag", the stack fault AE509 the interop
# tests compare against the same model with --jinja).  See docs/servers.md.
#
# Example:
#   scripts/ci/llama.sh && scripts/serve-llama-server.sh gemma3 127.0.0.1 8082 &
#   agent-eval run --base-url http://127.0.0.1:8082/v1 --model gemma3 --tool-choice required
set -euo pipefail

model=${1:?usage: scripts/serve-llama-server.sh smollm2|gemma3|FILE.gguf [HOST] [PORT]}
host=${2:-127.0.0.1}
port=${3:-8080}
# shellcheck source=scripts/llama-gguf.sh
source "$(dirname "$0")/llama-gguf.sh"
server=${AGENT_EVAL_LLAMA_SERVER:-$llama_venv/bin/llama-server}
if [[ ! -x "$server" ]]; then
    echo "Error: no llama-server at $server; run scripts/ci/llama.sh first" >&2
    exit 2
fi
llama_gguf "$model"

threads=${AGENT_EVAL_LLAMA_THREADS:-1}
template=()
if [[ -n "${AGENT_EVAL_CHAT_TEMPLATE:-}" ]]; then
    if [[ ! -f "$AGENT_EVAL_CHAT_TEMPLATE" ]]; then
        echo "Error: AGENT_EVAL_CHAT_TEMPLATE=$AGENT_EVAL_CHAT_TEMPLATE is not a file" >&2
        exit 2
    fi
    template=(--chat-template-file "$AGENT_EVAL_CHAT_TEMPLATE")
fi
jinja=(--jinja)
if [[ "${AGENT_EVAL_LLAMA_JINJA:-1}" == 0 ]]; then
    jinja=()
    if "$server" --help 2>&1 | grep -q -- '--no-jinja'; then
        jinja=(--no-jinja)  # jinja is this build's default
    fi
fi
exec "$server" --model "$gguf" --alias "$alias" --host "$host" --port "$port" "${jinja[@]}" \
    "${template[@]}" --ctx-size "${AGENT_EVAL_LLAMA_CTX:-8192}" --parallel 1 \
    --threads "$threads" --threads-batch "$threads" --no-warmup
