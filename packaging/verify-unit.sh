#!/usr/bin/env bash
# Verifies packaging/threadbalance.service with `systemd-analyze verify`, which checks
# every directive and that ExecStart's program exists and is executable. The unit names
# /usr/local/bin/threadbalance; this script checks a copy whose ExecStart points at the
# binary given as $1 instead (nothing is installed), and fails on any message, since
# systemd-analyze exits 0 even on unknown keys.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(realpath "${1:?usage: verify-unit.sh PATH/TO/threadbalance}")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/threadbalance|$bin|" "$here/threadbalance.service" > "$tmp/threadbalance.service"
grep -q "^ExecStart=$bin daemon --config /etc/threadbalance/threadbalance.toml$" "$tmp/threadbalance.service"
out="$(systemd-analyze verify "$tmp/threadbalance.service" 2>&1)" || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "systemd-analyze verify reported:"; echo "$out"; exit 1
fi
echo "threadbalance.service: verified ($(systemd-analyze --version | head -1))"
systemd-analyze security --offline=yes "$tmp/threadbalance.service" 2>/dev/null | tail -1 || true
