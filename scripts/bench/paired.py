#!/usr/bin/env python3
"""Compares two payreview builds on one workload in paired rounds: each round runs the floor and
both builds in turn, so a slow spell of a shared machine falls on all three. Prints each build's
median ratio to the floor and the median of the second build's time over the first's, round by
round: on a noisy machine a change of a few percent shows there long before it shows in two
separate runs of run.py.

Usage: scripts/bench/paired.py WORKLOAD OLD_BINARY NEW_BINARY [--runs 9] [--threads 2]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import FLOOR, measure  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload")
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    w = args.workload
    review = ["review", os.path.join(w, "pr.diff"), "--repo", os.path.join(w, "repo"),
              "--format", "json", "--fail-on", "never", "--isolated", "--output", os.devnull]
    cmds = [("floor", [FLOOR, os.path.join(w, "base"), os.path.join(w, "head")]),
            ("old", [args.old] + review), ("new", [args.new] + review)]
    got = {name: [] for name, _ in cmds}
    for _ in range(args.runs):
        for name, cmd in cmds:
            got[name].append(measure(cmd, env))
    for name in ("old", "new"):
        ratios = [s[0] / f[0] for s, f in zip(got[name], got["floor"])]
        print(f"{name}: median ratio to the floor {statistics.median(ratios):.3f}")
    paired = sorted(n[0] / o[0] for o, n in zip(got["old"], got["new"]))
    print(f"new / old, round by round: median {statistics.median(paired):.3f} "
          f"({' '.join(f'{p:.2f}' for p in paired)})")


if __name__ == "__main__":
    main()
