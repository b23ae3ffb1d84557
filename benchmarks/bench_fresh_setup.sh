#!/usr/bin/env bash
# What a fresh machine's `bash scripts/test.sh` costs: each set-up step and each pytest run,
# wall time, with the machine's load average.  One command:
#
#   bash benchmarks/bench_fresh_setup.sh            # then see BENCHMARKS.md, "fresh set-up"
#
# It clones this repository's HEAD (what CI tests) into a temporary folder, points HOME,
# XDG_CACHE_HOME, PIP_CACHE_DIR and the llama venv (AGENT_EVAL_LLAMA_VENV) at empty
# temporary folders, makes a fresh venv, and runs `CI=true bash scripts/test.sh` there
# (so nothing skips).  AGENT_EVAL_LLAMA_VENV=DIR (an absent folder, or one to reuse) keeps
# the llama build where you name it, e.g. the default ~/.cache/agent-eval/llama-venv, so
# later runs reuse it.  Debian's Chromium is installed system-wide: the browser step is
# fresh only when `chromium` is not installed yet (the table says which).  The timings are
# scripts/test.sh's own lines ("test.sh: STEP took N s"); the load average is sampled every
# 15 s.  Keeps the full log as bench_fresh_setup.log in the current folder.  The real-data
# corpora come from AGENT_EVAL_CORPORA or ../shared/corpora beside this repository.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$PWD/bench_fresh_setup.log
root=$(mktemp -d "${TMPDIR:-/tmp}/agent-eval-fresh.XXXXXX")
python=$(python3 -c 'import sys; print(sys.executable)')
llama_venv=${AGENT_EVAL_LLAMA_VENV:-$root/home/.cache/agent-eval/llama-venv}
chromium_before=$(command -v chromium || echo "not installed")
llama_before=$([ -e "$llama_venv" ] && echo "present (reused)" || echo "absent (built)")

if [ -z "${AGENT_EVAL_CORPORA:-}" ] && [ -d "$repo/../shared/corpora" ]; then
    AGENT_EVAL_CORPORA=$(cd "$repo/../shared/corpora" && pwd)  # as scripts/test.sh finds them
    export AGENT_EVAL_CORPORA
fi
git clone -q "$repo" "$root/clone"
mkdir -p "$root/home" "$root/cache" "$root/pip-cache"
"$python" -m venv "$root/venv"

loads="$root/loads"
(while true; do cut -d' ' -f1 /proc/loadavg >>"$loads"; sleep 15; done) &
sampler=$!
trap 'kill $sampler 2>/dev/null; rm -rf "$root"' EXIT

start=$(date -u +'%Y-%m-%d %H:%M UTC')
rc=0
(
    cd "$root/clone"
    export PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}" HOME="$root/home"
    export XDG_CACHE_HOME="$root/cache" PIP_CACHE_DIR="$root/pip-cache"
    export AGENT_EVAL_LLAMA_VENV="$llama_venv" CI=true
    # shellcheck disable=SC1091
    source "$root/venv/bin/activate"
    bash scripts/test.sh
) 2>&1 | tee "$out" || rc=$?
end=$(date -u +'%H:%M UTC')

echo
echo "fresh set-up, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs),"
echo "$start - $end; load average (1 min, every 15 s) min/mean/max:" \
     "$(sort -n "$loads" | awk '{a[NR]=$1; s+=$1} END {printf "%.1f / %.1f / %.1f", a[1], s/NR, a[NR]}')"
echo "chromium before: $chromium_before; llama venv before: $llama_before ($llama_venv)"
echo
printf '| %-58s | %8s |\n' "step" "wall s"
printf '|%s|%s:|\n' "$(printf -- '-%.0s' {1..60})" "$(printf -- '-%.0s' {1..9})"
sed -n 's/^\(  \[[a-z-]*\] \)\{0,1\}\(test\.sh\|llama\.sh\): \(.*\) took \([0-9]*\) s.*$/\3 \4/p;
        s/^\(  \[llama\] \)llama\.sh: \(.*\) (\([0-9]*\) s)$/llama.sh, by \2 \3/p' "$out" \
    | while read -r line; do
        printf '| %-58s | %8s |\n' "${line% *}" "${line##* }"
    done
grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed).* in ' "$out" | sed 's/^/pytest: /' || true
exit "$rc"
