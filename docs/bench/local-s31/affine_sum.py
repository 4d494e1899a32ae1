#!/usr/bin/env python3
"""Session 31: affine.txt or homed.txt -> per model and setting (0: the dynamic split), medians of pp512 t/s, the GEMM share and each GEMM's GOP/s."""
import re, statistics, sys
d = {}
cur = None
for line in open(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/local-s31/affine.txt"):
    m = re.match(r"== pair (\d+) (\S+) (?:affine|homed)=(\d)", line)
    if m:
        cur = d.setdefault((m.group(2), m.group(3)), {"tps": [], "share": [], "mm": {}})
        continue
    m = re.search(r"tandem ([\d.]+) \(GEMMs \d+ GOP/s, ([\d.]+)%", line)
    if m:
        cur["tps"].append(float(m.group(1))); cur["share"].append(float(m.group(2)))
        continue
    m = re.search(r"matmul (\d+ x \d+) int8, 512 rows \(GEMM\): .* ([\d.]+) GOP/s", line)
    if m:
        cur["mm"].setdefault(m.group(1), []).append(float(m.group(2)))
for (model, a), r in sorted(d.items()):
    mm = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in r["mm"].items())
    print(f"{model} setting={a}: pp512 {statistics.median(r['tps']):.0f} t/s ({min(r['tps']):.0f}-{max(r['tps']):.0f}), "
          f"GEMM share {statistics.median(r['share']):.1f}% ({min(r['share']):.1f}-{max(r['share']):.1f}); GOP/s {mm}")
