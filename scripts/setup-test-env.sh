#!/usr/bin/env bash
# Install what the browser tests (tests/test_server_browser.py) need beyond pip: Debian's
# headless Chromium and its matching chromedriver. Idempotent: it touches apt only when
# /usr/bin/chromium or /usr/bin/chromedriver is missing. Run as root (CI and the dev
# machines are); elsewhere install the two packages by hand.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "setup-test-env: chromium and chromium-driver are missing; run as root or:" >&2
    echo "  sudo apt-get install -y --no-install-recommends chromium chromium-driver" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium chromium-driver
/usr/bin/chromium --version
/usr/bin/chromedriver --version
