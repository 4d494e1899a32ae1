#!/usr/bin/env python3
"""Session 31: ffn.txt -> per model and setting, medians of pp512 t/s, the GEMM share, the gate|up GEMM's
GOP/s and the activation+prepare pass's share of the prefill (TANDEM_PROFILE=warm)."""
import re, statistics, sys
d = {}
cur = None
for line in open(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/local-s31/ffn.txt"):
    m = re.match(r"== (\d+) (\S+) (\w+)", line)
    if m:
        cur = d.setdefault((m.group(2), m.group(3)), {"tps": [], "share": [], "gu": [], "act": []})
        continue
    m = re.search(r"tandem ([\d.]+) \(GEMMs \d+ GOP/s, ([\d.]+)%", line)
    if m:
        cur["tps"].append(float(m.group(1))); cur["share"].append(float(m.group(2)))
    m = re.search(r"activation\+prepare ([\d.]+)%", line)
    if m:
        cur["act"].append(float(m.group(1)))
    m = re.search(r"matmul (9728 x 896|16384 x 2048|4864 x 896|8192 x 2048) int8.*\(GEMM\).* ([\d.]+) GOP/s", line)
    if m:
        cur["gu"].append(float(m.group(2)))
med = lambda v: statistics.median(v) if v else float("nan")
for (model, s), r in sorted(d.items()):
    print(f"{model} {s}: pp512 {med(r['tps']):.0f} t/s ({min(r['tps']):.0f}-{max(r['tps']):.0f}), GEMM share "
          f"{med(r['share']):.1f}%, gate|up GEMM {med(r['gu']):.0f} GOP/s, activation+prepare {med(r['act']):.1f}% of the prefill")
