#!/usr/bin/env bash
# Rebuilds every *.bpf.o from its *.bpf.c (futex.bpf.c: the lock probe; sched.bpf.c: the
# run-time counters; setaffinity.bpf.c: who set each mask) and records each object's
# SHA-256 in <name>.bpf.o.sha256.
# Needs clang with the BPF target (Debian: apt-get install clang llvm). The default build
# and the `bpf` feature build use the committed object and need no clang.
# sched.bpf.c claims slots with compare-and-exchange: the v3 instruction set.
set -euo pipefail
cd "$(dirname "$0")"
for name in futex sched setaffinity; do
  cpu=()
  [ "$name" = sched ] && cpu=(-mcpu=v3)
  clang -O2 -g -target bpf "${cpu[@]}" -Wall -Werror -fdebug-prefix-map="$(pwd)"=. -c "$name.bpf.c" -o "$name.bpf.o"
  # Strip DWARF (kept: BTF, which the loader needs) so the object does not carry paths.
  llvm-strip -g "$name.bpf.o"
  sha256sum "$name.bpf.o" | cut -d' ' -f1 > "$name.bpf.o.sha256"
  echo "$name.bpf.o $(cat "$name.bpf.o.sha256")"
done
