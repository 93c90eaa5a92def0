#!/usr/bin/env python3
"""The held-out grid for `speed`: fixed before any tuning of the machines-users-have work,
and never tuned on. Every cell runs the simulator with default settings (no --level, no
--hz, default counters and costs), `none` against `speed`, and prints Linux's wall time
over speed's (above 1: speed is faster) and speed's % of the fair share.

    python3 bench/holdout_grid.py [path/to/threadbalance] > grid.md

Shapes: one and two sockets, with and without SMT, 10 to 40 logical CPUs. Thread counts
relative to the logical CPUs M: M+1, 5M/4, 3M/2, 2M-1. Phases of 15 and 50 ms, yield and
blocking barriers, seeds 4 and 5 (the tuning grids use seeds 1-3).
"""
import json
import statistics
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/threadbalance"
SHAPES = [
    ("package:1 core:10 pu:1", 10),
    ("package:1 core:12 pu:2", 24),
    ("package:2 core:6 pu:2", 24),
    ("package:2 core:10 pu:2", 40),
]
PHASES = [15, 50]
WAITS = ["yield", "block"]
SEEDS = [4, 5]
WORK_MS = 1500


def counts(m):
    return sorted({m + 1, (5 * m) // 4, (3 * m) // 2, 2 * m - 1})


def cell(machine, n, phase, wait, seed):
    out = subprocess.run(
        [BIN, "sim", "--machine", machine, "--workload",
         f"ep-barrier:phase_ms={phase},wait={wait},work_ms={WORK_MS}",
         "--threads", str(n), "--policy", "none,speed", "--seed", str(seed), "--json"],
        check=True, capture_output=True, text=True).stdout
    res = {r["policy"]: r for r in json.loads(out)["results"]}
    return res["none"]["runtime_s"], res["speed"]["runtime_s"]


def main():
    print("| machine | N | phase ms | barrier | seed | Linux s | speed s | Linux/speed | speed % fair |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for machine, m in SHAPES:
        for n in counts(m):
            for phase in PHASES:
                for wait in WAITS:
                    for seed in SEEDS:
                        lin, spd = cell(machine, n, phase, wait, seed)
                        fair = WORK_MS / 1000 * max(1.0, n / m)
                        r = lin / spd
                        ratios.append(r)
                        print(f"| {machine} | {n} | {phase} | {wait} | {seed} | {lin:.3f} | "
                              f"{spd:.3f} | {r:.3f} | {100 * fair / spd:.1f} |", flush=True)
    print()
    print(f"cells {len(ratios)}; Linux/speed min {min(ratios):.3f} median "
          f"{statistics.median(ratios):.3f} max {max(ratios):.3f}; cells where speed is more "
          f"than 1 % slower: {sum(r < 0.99 for r in ratios)}")


if __name__ == "__main__":
    main()
