#!/usr/bin/env python3
"""The tables of docs/hotspot-hab.md from a log of run.sh: per threads and young size, the
young collections of each configuration (one figure where the rounds agree), the median
messages per second (thousands), and each per-CPU LAB configuration over stock (median of the
rounds' ratios, min-max).

    python3 summarize.py run-2-cpus.log
"""
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)  # (threads, young, config) -> [(round, rate, collections)]
configs = []
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 6 or not parts[0].isdigit():
        continue
    round_, threads, young, config, rate, collections = parts
    if config not in configs:
        configs.append(config)
    runs[(int(threads), int(young), config)].append((int(round_), float(rate), collections))

labs = [c for c in configs if c.startswith("cpu-labs")]
print("| threads | young MiB | collections: " + " / ".join(configs) + " | messages/s (k, median): "
      + " / ".join(configs) + " | " + " | ".join(f"{c} over stock" for c in labs) + " |")
print("| ---: | ---: | --- | --- |" + " ---: |" * len(labs))
for threads, young in sorted({(t, y) for t, y, _ in runs}):
    def of(config):
        return runs.get((threads, young, config), [])
    collections = []
    rates = []
    for config in configs:
        seen = []
        for _, _, c in of(config):
            if c not in seen:
                seen.append(c)
        collections.append("/".join(seen) or "—")
        values = [r for _, r, _ in of(config)]
        rates.append(f"{statistics.median(values) / 1000:.0f}" if values else "—")
    ratios = []
    stock = {round_: rate for round_, rate, _ in of("stock")}
    for config in labs:
        per_round = [rate / stock[round_] for round_, rate, _ in of(config) if round_ in stock]
        ratios.append(f"{statistics.median(per_round):.2f} ({min(per_round):.2f}–{max(per_round):.2f})"
                      if per_round else "—")
    print(f"| {threads} | {young} | " + " / ".join(collections) + " | " + " / ".join(rates)
          + " | " + " | ".join(ratios) + " |")
