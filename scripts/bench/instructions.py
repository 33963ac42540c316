#!/usr/bin/env python3
"""Counts the instructions of payreview (repository mode) and of the floor on workloads made by
make_workload.py, under valgrind's callgrind on one thread, and prints their ratio.

Wall time on a shared machine moves by a fifth from one run to the next; instruction counts do
not, so they show where a build stands against the floor when the timed ratios straddle a
target. They are not time: they leave out page faults and cache misses. Under valgrind the SHA-1
of the `index` line check runs in software (valgrind hides the processor's SHA extensions),
which adds about 3% to the review's count on the sparse workloads.

Usage: scripts/bench/instructions.py WORKLOAD [WORKLOAD ...]
Needs valgrind. Build first:
  cargo build --release --bin payreview --example floor
Each workload takes a few times its timed run per command (medium: about a minute each).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import BIN, FLOOR  # noqa: E402


def instructions(cmd):
    """Instructions the whole process executed, as callgrind counts them."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = dict(os.environ, RAYON_NUM_THREADS="1")
        proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found = re.search(r"Collected : (\d+)", proc.stderr)
        if not found:
            raise SystemExit(f"callgrind gave no count for {' '.join(cmd)}:\n{proc.stderr[-2000:]}")
        return int(found.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="+")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed")
    print("| workload | floor G | repository G | ratio |")
    print("|---|---|---|---|")
    for w in args.workloads:
        w = os.path.abspath(w)
        floor = instructions([FLOOR, os.path.join(w, "base"), os.path.join(w, "head")])
        review = instructions([BIN, "review", os.path.join(w, "pr.diff"), "--repo",
                               os.path.join(w, "repo"), "--format", "json", "--fail-on", "never",
                               "--isolated", "--output", os.devnull])
        print(f"| {os.path.basename(w)} | {floor / 1e9:.3f} | {review / 1e9:.3f} | {review / floor:.2f} |")


if __name__ == "__main__":
    main()
