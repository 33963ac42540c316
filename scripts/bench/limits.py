#!/usr/bin/env python3
"""Peak memory and time of payreview on the hostile sizes of issue #6: a 200 MB diff and a diff
of 100,000 files, both in diff-only mode. Prints a Markdown table for BENCHMARKS.md.

Usage: scripts/bench/limits.py [--out DIR] [--threads 2]
Build first: cargo build --release --bin payreview
The diffs are generated (deterministically) into DIR, by default a temporary folder.
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "payreview")

# Payment-like code, so that the rules have something to do and findings are really made: one
# such function per file, the rest ordinary code, as in a large vendoring or generated-code PR.
FUNCTION = '''
def charge_{n}(client, order, cache):
    key = cache.get("idem:{n}:" + str(order.id))
    if key is None:
        key = str(uuid.uuid4())
        cache.set("idem:{n}:" + str(order.id), key, ex=86400)
    for attempt in range(3):
        try:
            response = httpx.post(
                "https://gateway.example/charges",
                json={{"amount": order.amount_{n}, "currency": order.currency}},
                headers={{"Idempotency-Key": key}},
                timeout=15,
            )
            return response.json()
        except (httpx.ConnectTimeout, httpx.ReadTimeout):
            time.sleep(2 ** attempt)
    return None
'''


ORDINARY = '''
def transform_{n}(rows, factor=1.5):
    """Scale the numeric columns of rows."""
    out = []
    for row in rows:
        item = dict(row)
        for key, value in row.items():
            if isinstance(value, (int, float)):
                item[key] = value * factor
        out.append(item)
    return sorted(out, key=lambda r: r.get("id", 0))
'''


def added_file(path, text):
    lines = text.splitlines()
    head = f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
    return head + f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{l}\n" for l in lines)


def write_huge(path, target_bytes):
    """About `target_bytes` of diff: files of ~100 KB of new code each."""
    body = (
        "import time\nimport uuid\n\nimport httpx\n"
        + FUNCTION.format(n=0)
        + "".join(ORDINARY.format(n=n) for n in range(300))
    )
    written, i = 0, 0
    with open(path, "w") as out:
        while written < target_bytes:
            chunk = added_file(f"svc/pay_{i:05}.py", body)
            out.write(chunk)
            written += len(chunk)
            i += 1
    return i


def write_many(path, files):
    """`files` files, each with a one-line change in the middle of a small function."""
    with open(path, "w") as out:
        for i in range(files):
            p = f"pkg/m{i // 1000:03}/mod_{i:06}.py"
            out.write(
                f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -10,4 +10,4 @@ def handler_{i}(request):\n"
                f"     value = request.get(\"v\")\n-    return value\n+    return value or {i}\n     \n"
                f" def other_{i}():\n"
            )


def measure(args, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [BIN, "review", *args, "--diff-only", "--format", "json", "--quiet"],
            env=env,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return (
            os.waitstatus_to_exitcode(status),
            wall,
            usage.ru_maxrss / 1024,
            out.read(),
            err.read().decode(errors="replace"),
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--threads", type=int, default=2)
    opts = parser.parse_args()
    folder = opts.out or tempfile.mkdtemp(prefix="payreview-limits-")
    os.makedirs(folder, exist_ok=True)
    huge = os.path.join(folder, "huge.diff")
    many = os.path.join(folder, "many.diff")
    files = write_huge(huge, 200 * 1000 * 1000)
    write_many(many, 100_000)
    runs = [
        ("200 MB diff, default caps (refused)", [huge]),
        ("200 MB diff, --max-diff-bytes 300000000", [huge, "--max-diff-bytes", "300000000"]),
        ("100,000 files, default --max-files 20000", [many]),
        ("100,000 files, --max-files 100000", [many, "--max-files", "100000"]),
    ]
    print(f"diffs in {folder}: huge.diff {os.path.getsize(huge) / 1e6:.0f} MB ({files} files), "
          f"many.diff {os.path.getsize(many) / 1e6:.0f} MB; {opts.threads} threads\n")
    print("| input | exit | wall s | peak RSS MB | findings | errors |")
    print("|---|---|---|---|---|---|")
    for name, args in runs:
        code, wall, rss, out, err = measure(args, opts.threads)
        if code == 2:
            said = [l.strip(" ×") for l in err.splitlines() if "larger than" in l]
            findings, errors = "-", (said[0] if said else err.strip() or "-")
        else:
            report = json.loads(out)
            findings = len(report["findings"])
            errors = "; ".join(e["message"] for e in report["errors"][:1]) or "none"
        print(f"| {name} | {code} | {wall:.1f} | {rss:.0f} | {findings} | {errors} |")


if __name__ == "__main__":
    main()
