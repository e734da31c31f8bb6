#!/bin/bash
# On a machine with at least 8 CPUs: the compare-and-swap level's short refill before (BEFORE)
# and after (AFTER) the carve limit: one thread pinned, in rounds; then 2 to 64 threads.
set -u
A=${AFTER:-target/release/hab}; B=${BEFORE:?the hab binary of the tree to compare with}
run() { "$@" --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['ns_per_alloc'])" 2>/dev/null || echo nan; }
declare -A C=(
[core256]="--mode hab --middle core:1MiB --tlab-size 256"
[core256k]="--mode hab --middle core:1MiB --tlab-size 256KiB"
[t256]="--mode tlab --tlab-size 256"
)
echo "== one thread: round tree config ns_per_object (pinned to CPU 2)"
for r in 1 2 3 4 5 6 7 8 9; do for t in before after; do H=$B; [ $t = after ] && H=$A
  for k in core256 core256k t256; do
    echo "$r $t $k $(run taskset -c 2 $H run --workload alloc-object ${C[$k]} --repeat 3 --warmup 1 --no-compute)"
  done; done; done
echo "== scaling: round tree threads config ns_per_object (64 M objects in all, 16 bytes)"
declare -A S=(
[core512k]="--mode hab --middle core:512KiB --tlab-size 1KiB"
[core256t]="--mode hab --middle core:1MiB --tlab-size 256"
)
for r in 1 2 3; do for n in 2 4 8 16 32 64; do for t in before after; do H=$B; [ $t = after ] && H=$A
  for k in core512k core256t; do
  echo "$r $t $n $k $(run $H run --workload alloc-array --threads $n --objects $((64000000 / n)) ${S[$k]} --repeat 3 --warmup 1 --no-compute)"
done; done; done; done
