#!/usr/bin/env python3
"""Times payreview against the floor (parse old and new, nothing else) on workloads made by
make_workload.py, and prints a Markdown table for BENCHMARKS.md.

Usage: scripts/bench/run.py WORKLOAD [WORKLOAD ...] [--runs 5] [--threads 2]
Each WORKLOAD is a folder holding base/, head/, repo/ and pr.diff. Build first:
  cargo build --release --bin payreview --example floor
"""

import argparse
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "payreview")
FLOOR = os.path.join(ROOT, "target", "release", "examples", "floor")


def measure(cmd, env):
    """(wall seconds, cpu seconds, peak RSS in MB) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed with {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def rounds(cmds, env, runs):
    """`runs` rounds in which each command runs once, in turn: a slow spell of a shared machine
    then falls on every command of a round rather than on all the runs of one. Gives each
    command's (wall, cpu, RSS) samples, round by round."""
    samples = {name: [] for name, _ in cmds}
    for _ in range(runs):
        for name, cmd in cmds:
            samples[name].append(measure(cmd, env))
    return samples


def median(samples, i):
    return statistics.median(s[i] for s in samples)


def python_bytes(folder):
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".py"))
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    print("| workload | mode | wall s | cpu s | peak RSS MB | ratio to floor | MB/s |")
    print("|---|---|---|---|---|---|---|")
    # Repository mode's seconds per MB and ratio to the floor, by workload name, for the
    # linearity lines at the end.
    per_mb = {}
    for w in args.workloads:
        w = os.path.abspath(w)
        mb = (python_bytes(os.path.join(w, "base")) + python_bytes(os.path.join(w, "head"))) / 1e6
        floor = [FLOOR, os.path.join(w, "base"), os.path.join(w, "head")]
        review = [BIN, "review", os.path.join(w, "pr.diff"), "--format", "json", "--fail-on", "never",
                  "--isolated", "--output", os.devnull]
        got = rounds([("floor", floor),
                      ("repository", review + ["--repo", os.path.join(w, "repo")]),
                      ("diff-only", review + ["--diff-only"])], env, args.runs)
        for mode, samples in got.items():
            wall, cpu, rss = (median(samples, i) for i in range(3))
            # The ratio of each round, then their median: both sides of a ratio ran in the
            # same spell.
            ratio = statistics.median(s[0] / f[0] if f[0] else float("nan")
                                      for s, f in zip(samples, got["floor"]))
            print(f"| {os.path.basename(w)} | {mode} | {wall:.3f} | {cpu:.3f} | {rss:.0f} | {ratio:.2f} | {mb / wall:.1f} |")
            if mode == "repository":
                per_mb[os.path.basename(w)] = (wall / mb, ratio)
    linearity(per_mb)


def linearity(per_mb):
    """Time per MB of the large workload against the medium one, for each density measured at
    both sizes. Raw, as the target states it; and against the floor, which divides out how fast
    the host was while each workload ran (they run minutes apart) and the mix of the files."""
    for density in ("dense", "sparse"):
        medium, large = per_mb.get(f"medium-{density}"), per_mb.get(f"large-{density}")
        if medium and large and medium[0] and medium[1]:
            print(f"\n{density}: time per MB, large against medium: {large[0] / medium[0]:.2f} "
                  f"(against the floor: {large[1] / medium[1]:.2f})")


if __name__ == "__main__":
    main()
