#!/bin/bash
# On a machine with at least 4 CPUs: more rounds of the refill path's time goals, before and
# after; scaling of the refill-heavy configurations before and after; shared mode's collapse.
set -u
A=${AFTER:-target/release/hab}; B=${BEFORE:?the hab binary of the tree to compare with}
run() { "$@" --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['ns_per_alloc'])" 2>/dev/null || echo nan; }
declare -A C=(
[t256]="alloc-object --mode tlab --tlab-size 256"
[t256k]="alloc-object --mode tlab --tlab-size 256KiB"
[cpu256]="alloc-object --mode hab --middle cpu:256KiB --tlab-size 256"
[core256]="alloc-object --mode hab --middle core:1MiB --tlab-size 256"
[cpulab]="alloc-object --mode cpu-lab"
[tlab]="alloc-object --mode tlab"
[hab2]="alloc-array --threads 2 --objects 16000000 --mode hab --middle core:512KiB --tlab-size 1KiB"
[habcpu2]="alloc-array --threads 2 --objects 16000000 --mode hab --middle cpu:512KiB --tlab-size 1KiB"
[tlab1m2]="alloc-array --threads 2 --objects 16000000 --mode tlab --tlab-size 1MiB"
[tlab1k2]="alloc-array --threads 2 --objects 16000000 --mode tlab --tlab-size 1KiB"
)
KEYS="t256 t256k cpu256 core256 cpulab tlab hab2 habcpu2 tlab1m2 tlab1k2"
echo "== goals: round tree key ns_per_object (1 thread on CPU 2; 2 threads on CPUs 2,3)"
for r in 1 2 3 4 5 6 7 8 9 10 11; do for t in before after; do H=$B; [ $t = after ] && H=$A
  for k in $KEYS; do pin="taskset -c 2"; [[ $k == *2 ]] && pin="taskset -c 2,3"
    echo "$r $t $k $(run $pin $H run --workload ${C[$k]} --repeat 3 --warmup 1 --no-compute)"
  done; done; done
echo "== scaling: round tree threads config ns_per_object (64 M objects in all, 16 bytes)"
declare -A S=(
[tlab1k]="--mode tlab --tlab-size 1KiB"
[tlab1m]="--mode tlab --tlab-size 1MiB"
[core512k]="--mode hab --middle core:512KiB --tlab-size 1KiB"
[cpu512k]="--mode hab --middle cpu:512KiB --tlab-size 1KiB"
)
for r in 1 2 3; do for n in 8 16 32 64; do for t in before after; do H=$B; [ $t = after ] && H=$A
  for k in tlab1k tlab1m core512k cpu512k; do
  echo "$r $t $n $k $(run $H run --workload alloc-array --threads $n --objects $((64000000 / n)) ${S[$k]} --repeat 3 --warmup 1 --no-compute)"
done; done; done; done
echo "== shared: round threads ns_per_object (4 M objects in all)"
for r in 1 2 3; do for n in 1 2 4 8 16; do
  echo "$r $n $(run $A run --workload alloc-array --threads $n --objects $((4000000 / n)) --mode shared --repeat 3 --warmup 1 --no-compute)"
done; done
