#!/usr/bin/env python3
"""tools/abmed.py: medians of interleaved A/B rounds (device and dev runs).

Reads lines "r<ROUND> <VARIANT> <CASE ...>: <value> <unit> ..." (other lines are
ignored), e.g. what a script writes as
    echo "r$round NEW int4g64 1152 896 1: $(kbench ... | grep -o '[0-9.]* GB/s')"
and prints per case the median of each variant over the rounds, each variant's
ratio to the first one seen, and the rounds' values (the noise, in full).

    python3 tools/abmed.py all.txt [more.txt ...]
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"^r(\d+) (\S+) (.+?): .*?([0-9]+(?:\.[0-9]+)?) ?([A-Za-z/%]+)")


def main(paths):
    vals = collections.defaultdict(list)  # (case, variant) -> values
    cases, variants, units = {}, {}, {}
    for p in paths:
        with open(p) as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m:
                    continue
                _, var, case, v, unit = m.groups()
                vals[(case, var)].append(float(v))
                cases.setdefault(case, None)
                variants.setdefault(var, None)
                units[case] = unit
    for case in cases:
        row, base = [], None
        for var in variants:
            xs = vals.get((case, var))
            if not xs:
                continue
            med = statistics.median(xs)
            if base is None:
                base = med
                row.append(f"{var} {med:.2f}")
            else:
                row.append(f"{var} {med:.2f} (x{med / base:.2f})" if base else f"{var} {med:.2f}")
        detail = "; ".join(f"{var} {vals[(case, var)]}" for var in variants if (case, var) in vals)
        print(f"{case:28s} {units[case]:5s} " + "  ".join(row) + f"   [{detail}]")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
