#!/usr/bin/env python3
"""Tables from run.sh's log: per thread count, each configuration's nanoseconds per object
(median and range over the rounds) and its time against stock adaptive TLABs of the same
collector (median and range of the per-round ratios).

    python3 summarize.py run-2-cpus.log
"""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(dict)  # (threads, config) -> {round: ns}
with open(sys.argv[1]) as log:
    in_rows = False
    for line in log:
        if line.startswith("== round"):
            in_rows = True
            continue
        fields = line.split()
        if not in_rows or len(fields) != 4 or fields[3] == "nan":
            continue
        round_, threads, config, ns = fields
        rows[(int(threads), config)][int(round_)] = float(ns)

configs = []
for _, config in rows:
    if config not in configs:
        configs.append(config)
for threads in sorted({t for t, _ in rows}):
    print(f"\n{threads} thread(s): ns per object per thread; time against stock adaptive TLABs")
    print("| run | ns per object (median, range) | × stock adaptive (median, range) |")
    print("| --- | ---: | ---: |")
    for config in configs:
        runs = rows.get((threads, config))
        if not runs:
            continue
        base = rows[(threads, "g1-stock" if config.startswith("g1") else "stock")]
        ratios = [runs[r] / base[r] for r in runs if r in base]
        ns = list(runs.values())
        print(f"| {config} | {statistics.median(ns):.2f} ({min(ns):.2f}–{max(ns):.2f}) | "
              f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) |")
