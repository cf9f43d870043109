#!/usr/bin/env bash
# Installs what the test suite needs beyond cargo: Dovecot (Debian's dovecot-imapd), the real
# IMAP server the e-mail tests start on loopback, and the programs the sandbox tests run inside
# the sandbox or around it: curl, python3, setpriv (util-linux) and script (bsdutils); and
# systemd-analyze (systemd), which checks the units `hermesd service install` writes; and Chromium
# with its WebDriver (chromium, chromium-driver), which the control panel's browser test drives.
# Idempotent: installs only what is missing, nothing when all is there. Never starts a system
# service.
set -euo pipefail

packages=()
if ! command -v dovecot >/dev/null 2>&1 && [ ! -x /usr/sbin/dovecot ]; then
    packages+=(dovecot-imapd)
fi
for pair in curl:curl python3:python3 setpriv:util-linux script:bsdutils systemd-analyze:systemd \
    chromium:chromium chromedriver:chromium-driver; do
    if ! command -v "${pair%%:*}" >/dev/null 2>&1; then
        packages+=("${pair#*:}")
    fi
done
if [ "${#packages[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "test-deps: ${packages[*]} missing and this user can neither install packages (not root) nor use sudo;" >&2
    echo "test-deps: install Debian's ${packages[*]}, then run the tests again" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: ${packages[*]} missing and apt-get is not available; install them yourself" >&2
    exit 1
fi

# The package's postinst would start Dovecot as a service; the tests run their own instances, so
# service starts are refused while installing (policy-rc.d exit 101), unless a policy exists.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod +x "$policy"
    added_policy=1
fi
cleanup() {
    if [ "$added_policy" -eq 1 ]; then
        "${as_root[@]}" rm -f "$policy"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
