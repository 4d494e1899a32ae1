#!/usr/bin/env python3
"""Session 31: dnnl.txt -> a table of tandem's (bf16 y) and oneDNN's int8 GEMM, medians over the rounds.
The peak is kbench's paired peak (its GOP/s over its share); tandem's bf16-y share is kbench's alternative build."""
import re, statistics, sys
rows = {}
cur = None
for line in open(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/local-s31/dnnl.txt"):
    m = re.match(r"== round (\d) (\w+) (\d+ \d+ \d+)", line)
    if m:
        cur = rows.setdefault((m.group(3), m.group(2)), {"ours": [], "dnnl": [], "peak": []})
        continue
    m = re.search(r"paired with the AMX peak.*median ([\d.]+) GFLOP/s, median ([\d.]+)% of the peak", line)
    if m:
        cur["peak"].append(float(m.group(1)) / float(m.group(2)) * 100)
        continue
    m = re.search(r"alternative build: median ([\d.]+)% of the peak", line)
    if m:
        cur["ours"].append(float(m.group(1)))
        continue
    m = re.search(r"^dnnl .*: (\d+) GOP/s", line)
    if m:
        cur["dnnl"].append(float(m.group(1)) / cur["peak"][-1] * 100)
print("| M x N x K | caches | tandem, % of peak | oneDNN 2.6, % of peak | tandem / oneDNN |")
print("|---|---|---:|---:|---:|")
for (shape, cond), r in rows.items():
    o, d = statistics.median(r["ours"]), statistics.median(r["dnnl"])
    print(f"| {shape.replace(' ', ' x ')} | {cond} | {o:.1f} | {d:.1f} | {o / d:.2f}x |")
