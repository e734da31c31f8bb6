#!/bin/bash
# On a machine with at least 4 CPUs: a TLAB refill through the restartable `cpu` level against
# one through the compare-and-swap `core` level (256-byte TLABs, so that nearly every 16th
# allocation is a refill; one thread pinned to a CPU, two to two), and hab.h's inline paths
# timed in a C loop (alloc_loop.c, 100 M objects of 16 bytes), in interleaved rounds.
# HAB=... LOOP=... ROUNDS=... CPU=2 CPUS=2,3 bash run-5.sh
set -u
H=${HAB:-target/device/hab}; L=${LOOP:-target/device/alloc_loop}; N=${ROUNDS:-20}
ONE=${CPU:-2}; TWO=${CPUS:-2,3}
run() { "$@" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['ns_per_alloc'])" 2>/dev/null || echo nan; }
echo "== machine"
nproc; uname -r; ldd --version | head -1
lscpu | grep -E "^(Model name|Socket|Core|Thread|L3|NUMA node\(s\))" || true
echo "== refill: round threads level ns_per_object"
for r in $(seq 1 "$N"); do
  for level in cpu core; do
    echo "$r 1 $level $(run taskset -c "$ONE" "$H" run --workload alloc-object --mode hab --middle "$level:1MiB" --tlab-size 256 --objects 20000000 --repeat 3 --warmup 1 --no-compute)"
    echo "$r 2 $level $(run taskset -c "$TWO" "$H" run --workload alloc-object --threads 2 --mode hab --middle "$level:1MiB" --tlab-size 256 --objects 10000000 --repeat 3 --warmup 1 --no-compute)"
  done
done
echo "== C loop: round path ns_per_object (one CPU)"
for r in $(seq 1 "$N"); do
  for path in "tlab" "cpu-lab cpu-lab-first" "cpu-lab"; do
    # shellcheck disable=SC2086
    echo "$r ${path// /+} $(taskset -c "$ONE" "$L" 100000000 $path | awk '{print $2}')"
  done
done
