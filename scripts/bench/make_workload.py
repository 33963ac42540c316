#!/usr/bin/env python3
"""Builds a benchmark pull request for payreview from a folder of Python sources.

From SRC (any folder of .py files, e.g. the site-packages of a virtualenv holding django,
botocore, sqlalchemy, networkx and twisted) it takes the first N files (sorted, deterministic), and
writes OUT/base/ (the files as they are), OUT/head/ (edited, still valid Python: every edit is
checked with ast.parse), OUT/repo/ (a git repository whose HEAD commit is base and whose work tree
is head) and OUT/pr.diff (`git diff` between them).

Densities:
  dense   an edit every ~40 lines (a formatter or codemod PR)
  sparse  one changed function per file (an ordinary PR)
Every 10th file also gets payment-like code (a cache get/set, a retry loop with sleeps, an HTTP
call with a scalar timeout, a broad except returning None) so that the rules really fire.

Usage: make_workload.py SRC OUT --files N --density dense|sparse [--seed S]
"""

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys

PAYMENT_BLOCK = '''

def _bench_charge_{n}(order_id, amount, currency, timeout=15.0):
    cached = redis_client.get(f"idemp:{{order_id}}")
    if cached is not None:
        key = cached.decode()
    else:
        key = str(uuid.uuid4())
        redis_client.set(f"idemp:{{order_id}}", key, ex=60 * 60 * 24)
    for attempt in range(1, 4):
        try:
            response = httpx.post(
                "https://psp.example/charges",
                json={{"order": order_id, "amount": amount, "currency": currency}},
                headers={{"Idempotency-Key": key}},
                timeout=timeout,
            )
            return response.json()
        except (httpx.ConnectTimeout, httpx.ReadTimeout):
            time.sleep(2 ** attempt)
        except Exception:
            return None
    return None
'''


def python_files(src):
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "tests", "test"))
        for name in sorted(files):
            if name.endswith(".py"):
                out.append(os.path.join(root, name))
    return out


def valid(text):
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def statement_lines(tree):
    """(line, indent) of every simple statement that starts a line: safe places to insert before."""
    spots = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not getattr(node, "decorator_list", None):
                spots.append((node.lineno, node.col_offset))
    return sorted(set(spots))


def insert_before(lines, spots, every):
    chosen, last = [], -every
    for line, indent in spots:
        if line - last >= every:
            chosen.append((line, indent))
            last = line
    for n, (line, indent) in enumerate(reversed(chosen)):
        lines.insert(line - 1, " " * indent + f"_bench_edit = {n}  # payreview bench\n")
    return lines


def edit(text, density, rng, index):
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if density == "dense":
        lines = insert_before(lines, statement_lines(tree), 40)
    else:
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.body]
        if funcs:
            func = rng.choice(funcs)
            first = func.body[0]
            lines.insert(first.lineno - 1, " " * first.col_offset + "_bench_edit = 1  # payreview bench\n")
    if index % 10 == 0:
        lines.append(PAYMENT_BLOCK.format(n=index))
    head = "".join(lines)
    return head if valid(head) else None


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
                   cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src")
    parser.add_argument("out")
    parser.add_argument("--files", type=int, required=True)
    parser.add_argument("--density", choices=["dense", "sparse"], required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    base, head, repo = (os.path.join(args.out, d) for d in ("base", "head", "repo"))
    taken = 0
    for path in python_files(args.src):
        if taken >= args.files:
            break
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        new = edit(text, args.density, rng, taken)
        if new is None or new == text:
            continue
        rel = os.path.relpath(path, args.src)
        for root, content in ((base, text), (head, new)):
            dest = os.path.join(root, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8") as f:
                f.write(content)
        taken += 1
    shutil.copytree(base, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    shutil.rmtree(repo + "_tmp", ignore_errors=True)
    for entry in os.listdir(repo):
        if entry != ".git":
            target = os.path.join(repo, entry)
            shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)
    shutil.copytree(head, repo, dirs_exist_ok=True)
    with open(os.path.join(args.out, "pr.diff"), "wb") as f:
        subprocess.run(["git", "-c", "core.abbrev=7", "diff", "--no-color", "--no-ext-diff"],
                       cwd=repo, check=True, stdout=f)
    size = os.path.getsize(os.path.join(args.out, "pr.diff"))
    print(f"{taken} files, diff {size / 1e6:.1f} MB -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
