#!/usr/bin/env python3
"""Times repository context: a 5-file pull request reviewed with and without its repository.

Generates OUT/repo, a git repository of N Python modules (default 5,000: packages of 100
modules, each with imports, functions calling each other, a class; a Redis client module and
Celery tasks that reach the payment client), commits it, edits 5 files (the payment client gets
a retry loop with a `.decode()` of a cached key, so the rules need the repository's context; 4
ordinary modules get small edits) and writes OUT/pr.diff. Then it times, median of --runs:

  diff-only        payreview review pr.diff --diff-only
  repo, no context the 4 ordinary edits only, in repository mode: no rule asks for the index,
                   so the repository is not indexed (it is built lazily)
  repo, context    the whole pull request in repository mode: the index reads every module

Usage: context.py OUT [--files N] [--runs R] [--binary target/release/payreview]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

MODULE = '''"""Generated module {n}."""

import logging

from app.pkg_{p}.mod_{prev} import helper_{prev}
from app.pkg_{p} import mod_{prev2} as sibling

logger = logging.getLogger(__name__)

LIMIT_{n} = {n} * 2


def helper_{n}(value):
    total = 0
    for item in range(value % 7):
        total += item * LIMIT_{n}
    return total


def compute_{n}(order_id, amount):
    base = helper_{prev}(amount)
    extra = sibling.helper_{prev2}(amount + 1)
    logger.debug("order %s: %s + %s", order_id, base, extra)
    return base + extra + helper_{n}(amount)


class Service{n}:
    def __init__(self, name):
        self.name = name

    def run(self, order_id, amount):
        return compute_{n}(order_id, amount)

    def describe(self):
        return f"{{self.name}}: {n}"
'''

CLIENT_BASE = '''import logging

import httpx

from app.cache import redis_client

logger = logging.getLogger(__name__)


def create_charge(order_id, amount, currency, timeout=10.0):
    response = httpx.post(
        "https://psp.example/charges",
        json={"order": order_id, "amount": amount, "currency": currency},
        timeout=timeout,
    )
    response.raise_for_status()
    return response.json()
'''

CLIENT_HEAD = '''import logging
import time
import uuid

import httpx

from app.cache import redis_client

logger = logging.getLogger(__name__)


def create_charge(order_id, amount, currency, timeout=15.0):
    key = _key(order_id)
    for attempt in range(1, 4):
        try:
            response = httpx.post(
                "https://psp.example/charges",
                json={"order": order_id, "amount": amount, "currency": currency},
                headers={"Idempotency-Key": key},
                timeout=timeout,
            )
            response.raise_for_status()
            return response.json()
        except (httpx.ConnectTimeout, httpx.ReadTimeout):
            time.sleep(2 ** attempt)
    return None


def _key(order_id):
    cached = redis_client.get(f"idemp:{order_id}")
    if cached is not None:
        return cached.decode()
    key = str(uuid.uuid4())
    redis_client.set(f"idemp:{order_id}", key, ex=86400)
    return key
'''

CACHE = '''import redis

redis_client = redis.Redis.from_url("redis://cache:6379/0", decode_responses=True)
'''

TASKS = '''import httpx

from app.celery_app import celery_app
from app.payments.client import create_charge


@celery_app.task(autoretry_for=(httpx.HTTPError,), soft_time_limit=30)
def charge_order(order_id, amount, currency):
    result = create_charge(order_id, amount, currency)
    return result["id"]
'''


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True)


def module_path(n):
    return f"app/pkg_{n // 100}/mod_{n}.py"


def generate(out, files):
    repo = os.path.join(out, "repo")
    shutil.rmtree(out, ignore_errors=True)
    for n in range(files):
        p = n // 100
        first = p * 100
        prev = first + (n - first - 1) % 100 if n > first else first
        prev2 = first + (n - first + 37) % 100
        prev = min(prev, files - 1)
        prev2 = min(prev2, files - 1)
        write(os.path.join(repo, module_path(n)),
              MODULE.format(n=n, p=p, prev=prev, prev2=prev2))
    for p in range((files + 99) // 100):
        write(os.path.join(repo, f"app/pkg_{p}/__init__.py"), "")
    write(os.path.join(repo, "app/__init__.py"), "")
    write(os.path.join(repo, "app/cache.py"), CACHE)
    write(os.path.join(repo, "app/celery_app.py"), 'from celery import Celery\n\ncelery_app = Celery("app")\n')
    write(os.path.join(repo, "app/tasks.py"), TASKS)
    write(os.path.join(repo, "app/payments/__init__.py"), "")
    write(os.path.join(repo, "app/payments/client.py"), CLIENT_BASE)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com",
        "commit", "-q", "-m", "base")
    # The pull request: the payment client and 4 ordinary modules.
    ordinary = [module_path(n) for n in (1, files // 3, files // 2, files - 2)]
    for rel in ordinary:
        path = os.path.join(repo, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        write(path, text.replace("total += item", "total += 1 + item"))
    write(os.path.join(repo, "app/payments/client.py"), CLIENT_HEAD)
    full = subprocess.run(["git", "-C", repo, "diff", "--full-index"], check=True,
                          capture_output=True).stdout
    plain = subprocess.run(["git", "-C", repo, "diff", "--full-index", "--", *ordinary],
                           check=True, capture_output=True).stdout
    with open(os.path.join(out, "pr.diff"), "wb") as f:
        f.write(full)
    with open(os.path.join(out, "plain.diff"), "wb") as f:
        f.write(plain)
    return repo


def timed(cmd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace')}")
    return statistics.median(times), done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--binary", default="target/release/payreview")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    repo = generate(args.out, args.files)
    pr = os.path.join(args.out, "pr.diff")
    plain = os.path.join(args.out, "plain.diff")
    common = ["review", "--format", "json", "--isolated", "--fail-on", "never"]
    cases = [
        ("diff-only", [binary, *common, pr, "--diff-only"]),
        ("repo, no context", [binary, *common, plain, "--repo", repo]),
        ("repo, context", [binary, *common, pr, "--repo", repo]),
    ]
    print(f"{args.files} modules, median of {args.runs} runs, "
          f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}")
    print("| case | wall s | RETRY005 | IDEM002 blocker |")
    print("|---|---|---|---|")
    for name, cmd in cases:
        seconds, out = timed(cmd, args.runs)
        findings = json.loads(out)["findings"]
        retry005 = any(f["rule"] == "RETRY005" for f in findings)
        idem002 = any(f["rule"] == "IDEM002" and f["severity"] == "blocker" for f in findings)
        print(f"| {name} | {seconds:.3f} | {'yes' if retry005 else 'no'} | "
              f"{'yes' if idem002 else 'no'} |")


if __name__ == "__main__":
    main()
