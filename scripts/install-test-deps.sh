#!/usr/bin/env bash
# Installs what threadbalance's tests need on Debian or Ubuntu, beyond Rust itself, and
# mounts tracefs. Run it as root, or as a user with sudo: it calls sudo only when not root
# and sudo exists. What is already there is left alone; running it twice does nothing more.
#
#   gcc, libgomp1   a C compiler with OpenMP, for the tests that build an OpenMP program
#   prometheus      prometheus and promtool, for the daemon's metrics tests
#   tmux            a real terminal for the live tests of `threadbalance top`
#   systemd         systemd-analyze, for the check of packaging/threadbalance.service
#   tracefs         mounted at /sys/kernel/tracing, for the BPF counters and futex probe
#                   the default build loads as root
#
# Packages are installed with services kept from starting: Debian's prometheus package
# would start prometheus and its node exporter; the tests start their own server on a free
# port and stop it by pid.
set -euo pipefail

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-test-deps: needs root: run it as root or install sudo" >&2
  exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: no apt-get: install gcc with OpenMP (libgomp), prometheus (with promtool), tmux and systemd-analyze with this system's package manager" >&2
  exit 2
fi

missing=()
if ! command -v cc >/dev/null 2>&1 || ! echo 'int main(void){return 0;}' | cc -fopenmp -x c - -o /dev/null 2>/dev/null; then
  missing+=(gcc libgomp1)
fi
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  missing+=(prometheus)
fi
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-test-deps: installing ${missing[*]}"
  made=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${as_root[@]}" chmod +x /usr/sbin/policy-rc.d
    made=1
  fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  if [ -n "$made" ]; then "${as_root[@]}" rm -f /usr/sbin/policy-rc.d; fi
fi

if [ ! -d /sys/kernel/tracing/events/syscalls ] && [ ! -d /sys/kernel/debug/tracing/events/syscalls ]; then
  "${as_root[@]}" mount -t tracefs tracefs /sys/kernel/tracing ||
    echo "install-test-deps: could not mount tracefs; the live BPF tests will say so" >&2
fi
echo "install-test-deps: done"
