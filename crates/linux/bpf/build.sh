#!/usr/bin/env bash
# Rebuilds futex.bpf.o from futex.bpf.c and records its SHA-256 in futex.bpf.o.sha256.
# Needs clang with the BPF target (Debian: apt-get install clang llvm). The default build
# and the `bpf` feature build use the committed object and need no clang.
set -euo pipefail
cd "$(dirname "$0")"
clang -O2 -g -target bpf -Wall -Werror -fdebug-prefix-map="$(pwd)"=. -c futex.bpf.c -o futex.bpf.o
# Strip DWARF (kept: BTF, which the loader needs) so the object does not carry paths.
llvm-strip -g futex.bpf.o
sha256sum futex.bpf.o | cut -d' ' -f1 > futex.bpf.o.sha256
echo "futex.bpf.o $(cat futex.bpf.o.sha256)"
