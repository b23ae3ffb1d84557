#!/usr/bin/env bash
# The browser tests' set-up: Debian's Chromium (Playwright's own browser download cannot
# run here) and the Playwright Python package.  Idempotent: does nothing already done.
# Usage: scripts/ci/browser.sh   (as root, or with sudo available, for apt-get)
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
# under scripts/test.sh's pip lock: it installs the test extras (Playwright among them) into
# the same Python at the same time
if ! python -c "import playwright" >/dev/null 2>&1; then
  flock "${TMPDIR:-/tmp}/agent-eval-pip.lock" python -m pip install -q playwright
fi
echo "chromium: $(command -v chromium || echo /usr/bin/chromium)"
