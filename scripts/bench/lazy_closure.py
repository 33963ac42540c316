#!/usr/bin/env python3
"""How much of a change's new text a lazy review would still have to parse (BENCHMARKS.md,
"Twentieth session"): the functions the diff touches, the module-level code of their files, and
the functions within DEPTH calls of a touched one, either way (what it calls, what calls it).

Calls are followed two ways:
  bare     by name, anywhere in the change (what the reach tables do today: every `get` is
           every function called `get`);
  precise  `self.m()` to the method of the same class, `f()` to the module's own `f` or the `f`
           an import names, `obj.m()` to a function only if the change defines one `m`.

Usage: scripts/bench/lazy_closure.py WORKLOAD [--depth 0 1 2 3] [--trace FILE]
WORKLOAD holds head/ and pr.diff (make_workload.py). Python's own `ast` reads the files: this is
an estimate of the share, not payreview's parse.

With --trace, the questions a review really asked of the change instead (BENCHMARKS.md,
"Twenty-first session"): FILE is the standard error of a review of WORKLOAD by a build with
scripts/bench/trace_questions.patch applied, run with PAYREVIEW_TRACE=1. For each place in the
rules that asks, the share of the new text beyond the touched functions and module-level code
that its names bring in: the functions of each name it asks about (by bare name, as the change's
tables answer), or, for call sites, the functions calling one; then all of them together, and
with the walks the reach questions make (to their depth) followed by bare name and precisely.
"""

import argparse
import ast
import collections
import os
import re


def added_lines(diff_path):
    """New-side line numbers the diff adds (or deletes before), per path."""
    added = collections.defaultdict(set)
    path, line_no = None, 0
    with open(diff_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("+++ "):
                path = line[6:] if line.startswith("+++ b/") else None
            elif line.startswith("@@"):
                line_no = int(re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", line).group(1))
            elif path and line.startswith("+"):
                added[path].add(line_no)
                line_no += 1
            elif path and line.startswith("-"):
                added[path].add(line_no)
            elif path and line.startswith(" "):
                line_no += 1
    return added


def units_of(workload, added):
    """Every function of the touched files, and the bytes outside functions."""
    units, total, module_level = [], 0, 0
    for path, lines in added.items():
        full = os.path.join(workload, "head", path)
        if not full.endswith(".py") or not os.path.exists(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            src = f.read()
        total += len(src.encode())
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            module_level += len(src.encode())
            continue
        text_lines = src.split("\n")
        module = path[:-3].replace("/", ".").removesuffix(".__init__")
        imports = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    imports[alias.asname or alias.name] = (node.module, alias.name)
        covered = 0

        def visit(body, cls):
            nonlocal covered
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                    end = node.end_lineno
                    size = sum(len(t.encode()) + 1 for t in text_lines[start - 1 : end])
                    covered += size
                    calls = []
                    for c in ast.walk(node):
                        if not isinstance(c, ast.Call):
                            continue
                        fn = c.func
                        if isinstance(fn, ast.Name):
                            calls.append(("name", fn.id))
                        elif isinstance(fn, ast.Attribute):
                            own = isinstance(fn.value, ast.Name) and fn.value.id in ("self", "cls")
                            calls.append(("self" if own else "attr", fn.attr))
                    units.append(
                        {
                            "module": module,
                            "cls": cls,
                            "name": node.name,
                            "bytes": size,
                            "calls": calls,
                            "touched": any(start <= n <= end + 1 for n in lines),
                            "imports": imports,
                        }
                    )
                elif isinstance(node, ast.ClassDef):
                    visit(node.body, node.name)

        visit(tree.body, None)
        module_level += len(src.encode()) - covered
    return units, total, module_level


def edges(units, precise):
    by_name = collections.defaultdict(list)
    by_qual = collections.defaultdict(list)
    for i, u in enumerate(units):
        by_name[u["name"]].append(i)
        qual = (u["cls"] + "." if u["cls"] else "") + u["name"]
        by_qual[(u["module"], qual)].append(i)
    forward = []
    for u in units:
        out = []
        for kind, name in u["calls"]:
            if not precise:
                out += by_name.get(name, [])
            elif kind == "self" and u["cls"]:
                out += by_qual.get((u["module"], u["cls"] + "." + name), [])
            elif kind == "name":
                if (u["module"], name) in by_qual:
                    out += by_qual[(u["module"], name)]
                elif name in u["imports"]:
                    out += by_qual.get(u["imports"][name], [])
            elif len(by_name.get(name, [])) == 1:
                out += by_name[name]
        forward.append(out)
    backward = collections.defaultdict(list)
    for i, targets in enumerate(forward):
        for j in targets:
            backward[j].append(i)
    return forward, backward


def needed_share(units, total, module_level, depth, precise):
    forward, backward = edges(units, precise)
    touched = {i for i, u in enumerate(units) if u["touched"]}
    needed = set(touched)
    for step in (lambda i: forward[i], lambda i: backward[i]):
        seen, front = set(touched), set(touched)
        for _ in range(depth):
            front = {j for i in front for j in step(i)} - seen
            seen |= front
        needed |= seen
    size = sum(units[i]["bytes"] for i in needed)
    return (size + module_level) / total


def asked(units, total, module_level, trace_path):
    """What the questions of a traced review bring in, per place that asks and in all."""
    questions = []
    with open(trace_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            q = line.rstrip("\n").split("\t")
            if len(q) == 7 and q[0] == "Q" and q[2] == "New":
                questions.append({"kind": q[1], "name": q[3], "depth": int(q[4]), "site": q[6]})
    by_name = collections.defaultdict(list)
    for i, u in enumerate(units):
        by_name[u["name"]].append(i)
    touched = {i for i, u in enumerate(units) if u["touched"]}

    def share(needed):
        return (sum(units[i]["bytes"] for i in needed | touched) + module_level) / total

    def brought(qs):
        callers = {q["name"] for q in qs if q["kind"] == "calls"}
        named = {q["name"] for q in qs if q["kind"] != "calls"}
        out = {i for n in named for i in by_name.get(n, [])}
        return out | {i for i, u in enumerate(units) if any(n in callers for _, n in u["calls"])}

    base = share(set())
    print(f"touched functions and module-level code: {base:.0%}")
    print("| asked at | names | brought in beyond that |")
    print("|---|---|---|")
    for site in sorted({q["site"] for q in questions}):
        qs = [q for q in questions if q["site"] == site]
        names = len({q["name"] for q in qs})
        print(f"| {site} | {names} | {share(brought(qs)) - base:.0%} |")
    everything = brought(questions)
    line = f"all of them: {share(everything):.0%}"
    for precise in (False, True):
        forward, _ = edges(units, precise)
        needed = set(everything)
        for q in questions:
            if q["kind"] == "calls":
                continue
            front = set(by_name.get(q["name"], []))
            seen = set(front)
            for _ in range(q["depth"]):
                front = {j for i in front for j in forward[i]} - seen
                seen |= front
            needed |= seen
        line += f"; with the walks, {'precise' if precise else 'by bare name'}: {share(needed):.0%}"
    print(line)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload")
    parser.add_argument("--depth", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--trace")
    args = parser.parse_args()
    added = added_lines(os.path.join(args.workload, "pr.diff"))
    units, total, module_level = units_of(args.workload, added)
    print(f"{len(added)} files, {len(units)} functions, {total / 1e6:.2f} MB of new text, "
          f"{module_level / 1e6:.2f} MB outside functions")
    if args.trace:
        asked(units, total, module_level, args.trace)
        return
    print("| depth | bare names | precise |")
    print("|---|---|---|")
    for depth in args.depth:
        bare = needed_share(units, total, module_level, depth, False)
        precise = needed_share(units, total, module_level, depth, True)
        print(f"| {depth} | {bare:.0%} | {precise:.0%} |")


if __name__ == "__main__":
    main()
