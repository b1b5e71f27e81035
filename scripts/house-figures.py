#!/usr/bin/env python3
"""Figures of the hub's shape, for before/after comparisons of a restructuring.

Counts production code only: files under crates/*/src, leaving out `#[cfg(test)] mod` blocks,
proptests and tests/ folders. Prints the largest hub file and function, the functions over 100
lines in every crate, the number of `pub mod` in hub, `serde_json::Value` mentions in hub, runtime
assertions (`never!`) and module cycles inside each crate (one module naming another through
`crate::` paths, both ways, counted as pairs of top-level modules or files).

Usage: scripts/house-figures.py [ROOT]   (ROOT defaults to the checkout this script is in)
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)")


def strip_tests(lines):
    """Lines with `#[cfg(test)]` items (a mod or fn with braces) blanked out."""
    out = list(lines)
    i = 0
    while i < len(out):
        if out[i].strip().startswith("#[cfg(test)]"):
            j = i + 1
            depth = 0
            started = False
            while j < len(out):
                depth += out[j].count("{") - out[j].count("}")
                if "{" in out[j]:
                    started = True
                if started and depth <= 0:
                    break
                if not started and out[j].rstrip().endswith(";"):
                    break
                j += 1
            for k in range(i, min(j + 1, len(out))):
                out[k] = ""
            i = j + 1
        else:
            i += 1
    return out


def rust_files(crate):
    src = os.path.join(ROOT, "crates", crate, "src")
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs") and f not in ("proptests.rs", "tests.rs"):
                yield os.path.join(d, f)


def functions(lines):
    """(name, first line, length) of each fn with a body, by brace depth."""
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth = 0
        started = False
        for j in range(i, len(lines)):
            code = re.sub(r'"([^"\\]|\\.)*"', '""', lines[j].split("//")[0])
            code = re.sub(r"'([^'\\]|\\.)'", "''", code)
            if not started and ";" in code and "{" not in code:
                break
            depth += code.count("{") - code.count("}")
            if "{" in code:
                started = True
            if started and depth <= 0:
                found.append((m.group(6), i + 1, j - i + 1))
                break
    return found


def module_of(path, src):
    rel = os.path.relpath(path, src)
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts[0] if parts else ""


def main():
    crates = sorted(os.listdir(os.path.join(ROOT, "crates")))
    long_fns = []
    hub_files = []
    hub_fns = []
    pub_mods = 0
    values = 0
    nevers = 0
    cycles = []
    for crate in crates:
        src = os.path.join(ROOT, "crates", crate, "src")
        if not os.path.isdir(src):
            continue
        edges = set()
        for path in rust_files(crate):
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            prod = strip_tests(lines)
            rel = os.path.relpath(path, ROOT)
            fns = functions(prod)
            for name, at, n in fns:
                if n > 100:
                    long_fns.append((n, f"{rel}:{at} {name}"))
            me = module_of(path, src)
            text = "\n".join(prod)
            code = "\n".join(l.split("//")[0] for l in prod)
            for other in set(re.findall(r"crate::([a-z_0-9]+)", code)):
                if other != me and me:
                    edges.add((me, other))
            if crate == "hub":
                hub_files.append((len(lines), rel))
                hub_fns.extend((n, f"{rel}:{at} {name}") for name, at, n in fns)
                pub_mods += len(re.findall(r"^\s*pub mod ", text, re.M))
                values += code.count("serde_json::Value") + len(re.findall(r"(?<![A-Za-z_:])Value\b", code))
                nevers += len(re.findall(r"\bnever!\(", code))
        for a, b in sorted(edges):
            if a < b and (b, a) in edges:
                cycles.append(f"{crate}: {a} <-> {b}")
    hub_files.sort(reverse=True)
    hub_fns.sort(reverse=True)
    long_fns.sort(reverse=True)
    print(f"largest hub file:      {hub_files[0][0]} lines  {hub_files[0][1]}")
    print(f"largest hub function:  {hub_fns[0][0]} lines  {hub_fns[0][1]}")
    print(f"hub files:             {len(hub_files)}, {sum(n for n, _ in hub_files)} lines")
    print(f"pub mod in hub:        {pub_mods}")
    print(f"functions > 100 lines: {len(long_fns)}")
    for n, at in long_fns:
        print(f"    {n:5}  {at}")
    print(f"module cycles:         {len(cycles)}")
    for c in cycles:
        print(f"    {c}")
    print(f"Value mentions in hub: {values}")
    print(f"never! in hub:         {nevers}")


main()
