#!/usr/bin/env python3
"""Tables from run.sh's log: per thread count, each configuration's nanoseconds per object
(median and range over the rounds) and its time against stock adaptive TLABs of the same
collector under the same observer (median and range of the per-round ratios). Logs from before
run.sh took observers (four fields a line) read as runs with no observer.

    python3 summarize.py run-2-cpus.log
"""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(dict)  # (threads, config, observer) -> {round: ns}
with open(sys.argv[1]) as log:
    in_rows = False
    for line in log:
        if line.startswith("== round"):
            in_rows = True
            continue
        fields = line.split()
        if len(fields) == 4:
            fields.insert(3, "none")
        if not in_rows or len(fields) != 5 or fields[4] == "nan":
            continue
        round_, threads, config, observer, ns = fields
        rows[(int(threads), config, observer)][int(round_)] = float(ns)

configs = []
for _, config, observer in rows:
    if (config, observer) not in configs:
        configs.append((config, observer))
for threads in sorted({t for t, _, _ in rows}):
    print(f"\n{threads} thread(s): ns per object per thread; time against stock adaptive TLABs")
    print("| run | ns per object (median, range) | × stock adaptive, same observer (median, range) |")
    print("| --- | ---: | ---: |")
    for config, observer in configs:
        runs = rows.get((threads, config, observer))
        if not runs:
            continue
        base = rows[(threads, "g1-stock" if config.startswith("g1") else "stock", observer)]
        ratios = [runs[r] / base[r] for r in runs if r in base]
        ns = list(runs.values())
        name = config if observer == "none" else f"{config}, {observer}"
        print(f"| {name} | {statistics.median(ns):.2f} ({min(ns):.2f}–{max(ns):.2f}) | "
              f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) |")
