#!/usr/bin/env bash
# Install everything the test suite needs, then run the whole suite, so nothing skips:
#   - this package with its test extras (into the active Python),
#   - PostgreSQL on 127.0.0.1:5432 started when it is not answering (store tests),
#   - every set-up step in scripts/ci/*.sh (Debian's Chromium for the browser tests,
#     llama-cpp-python's server and two small GGUF models, llama.cpp's llama-server, for
#     the real-server tests).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/policy -x`.
# The suite runs in AGENT_EVAL_TEST_PROCESSES pytest-xdist processes (default 2), a test
# file per process at a time (--dist loadfile: a file's module fixtures are built once).
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q -e '.[test]'

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

for step in scripts/ci/*.sh; do
  [ -e "$step" ] || continue
  echo "+ bash $step"
  bash "$step"
done

processes="${AGENT_EVAL_TEST_PROCESSES:-2}"
echo "+ python -m pytest -p no:cacheprovider -rs -n $processes --dist loadfile $*"
set +e
python -m pytest -p no:cacheprovider -rs -n "$processes" --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
