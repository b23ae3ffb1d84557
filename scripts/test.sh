#!/usr/bin/env bash
# Install everything the test suite needs, then run the whole suite, so nothing skips:
#   - this package with its test extras (into the active Python),
#   - PostgreSQL on 127.0.0.1:5432 started when it is not answering (store tests),
#   - every set-up step in scripts/ci/*.sh (Debian's Chromium for the browser tests;
#     llama-cpp-python, llama.cpp's llama-server and two small GGUF models for the
#     real-server tests, from one llama.cpp compile: scripts/ci/llama.sh).
# The set-up steps run side by side: only the llama.cpp compile keeps the cores busy for
# long (the first time; later runs find it done), the others mostly wait on downloads and
# dpkg.  While it compiles, the suite's other tests run (the compile at a lower priority);
# the real-server tests (tests/interop) run once it is done.  Each step prints its time:
# benchmarks/bench_fresh_setup.sh measures a fresh machine's run (BENCHMARKS.md).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/policy -x`: then every
# set-up step finishes first and one pytest runs them.
# The suite runs in AGENT_EVAL_TEST_PROCESSES pytest-xdist processes (default 2), a test
# file per process at a time (--dist loadfile: a file's module fixtures are built once).
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
logs=$(mktemp -d "${TMPDIR:-/tmp}/agent-eval-test.XXXXXX")
declare -A pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done  # its own group
    rm -rf "$logs"
}
trap cleanup EXIT
took() { echo "test.sh: $1 took $(($SECONDS - $2)) s (at $((SECONDS - t0)) s)"; }

# each scripts/ci/*.sh in the background, its output kept until it ends
for step in scripts/ci/*.sh; do
    [ -e "$step" ] || continue
    name=$(basename "$step" .sh)
    echo "+ bash $step &"
    # its own process group (setsid), so an early exit stops its compilers too; it
    # writes when it ended, so its time is its own, not when it was waited for
    setsid bash -c 'bash "$0"; rc=$?; echo "$SECONDS" >"$1.end"; exit $rc' \
        "$step" "$logs/$name" >"$logs/$name.log" 2>&1 &
    pids[$name]=$!
done
finish() {  # finish NAME: wait for that set-up step, print its output, stop on failure
    local rc=0
    wait "${pids[$1]}" || rc=$?
    unset "pids[$1]"
    sed "s/^/  [$1] /" "$logs/$1.log"
    echo "test.sh: set-up step $1 took $(cat "$logs/$1.end" 2>/dev/null || echo "?") s"
    if [ "$rc" -ne 0 ]; then
        echo "error: scripts/ci/$1.sh failed (exit $rc)" >&2
        exit "$rc"
    fi
}

s=$SECONDS
# the pip lock: scripts/ci/browser.sh may install Playwright into this Python at the same time
flock "${TMPDIR:-/tmp}/agent-eval-pip.lock" python -m pip install -q -e '.[test]'
took "pip install -e .[test]" "$s"

if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start \
    || echo "warning: could not start PostgreSQL; the PostgreSQL store tests will skip" >&2
fi

# The opt-in groups run here too: the wheel test, and the real-data corpora when they sit
# beside the clone (../shared/corpora) or AGENT_EVAL_CORPORA names them.
export AGENT_EVAL_TEST_WHEEL="${AGENT_EVAL_TEST_WHEEL:-1}"
if [ -z "${AGENT_EVAL_CORPORA:-}" ] && [ -d ../shared/corpora ]; then
  AGENT_EVAL_CORPORA="$(cd ../shared/corpora && pwd)"
  export AGENT_EVAL_CORPORA
fi

processes="${AGENT_EVAL_TEST_PROCESSES:-2}"
pytest_rc=0
run_pytest() {
    local rc=0 s=$SECONDS
    echo "+ python -m pytest -p no:cacheprovider -rs -n $processes --dist loadfile $*"
    python -m pytest -p no:cacheprovider -rs -n "$processes" --dist loadfile "$@" || rc=$?
    took "pytest $*" "$s"
    if [ "$rc" -eq 5 ]; then
        echo "error: pytest collected no tests" >&2
        rc=1
    fi
    if [ "$pytest_rc" -eq 0 ]; then pytest_rc=$rc; fi
}

if [ "$#" -gt 0 ]; then
    for name in "${!pids[@]}"; do finish "$name"; done
    run_pytest "$@"
else
    # everything but the llama.cpp compile, then the tests that need none of it meanwhile
    for name in "${!pids[@]}"; do [ "$name" = llama ] || finish "$name"; done
    run_pytest --ignore=tests/interop
    [ -z "${pids[llama]:-}" ] || finish llama
    run_pytest tests/interop
fi
took "scripts/test.sh" 0
exit "$pytest_rc"
