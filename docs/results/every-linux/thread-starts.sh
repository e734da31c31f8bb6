#!/bin/bash
# What a Java thread's start costs with Hab's own rseq registration against glibc's:
# bench/jvm's ThreadStarts (threads started and joined one after another, each allocating one
# object) on the JVM build.sh made, stock and with HABs, each with glibc's registration and
# with it off (GLIBC_TUNABLES=glibc.pthread.rseq=0: no registration for stock, Hab's own for
# HABs), under Parallel, in interleaved rounds. Prints one line per run: round, configuration,
# microseconds per thread (the median of the program's rounds).
# JDK=... JAR=... ROUNDS=5 THREADS=2000 bash docs/results/every-linux/thread-starts.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
jar=${JAR:-bench/jvm/target/benchmarks.jar}
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "== round config us_per_thread"
for round in $(seq "${ROUNDS:-5}"); do
  for config in stock stock-off hab hab-own cpu-labs cpu-labs-own; do
    wrap=()
    case $config in
      *-off | *-own) wrap=(env GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
    esac
    case ${config%-o*} in
      stock) flags=-XX:-UseHAB ;;
      hab) flags=-XX:+UseHAB ;;
      cpu-labs) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
    esac
    out=$("${wrap[@]}" "$java" -XX:+UseParallelGC $flags -cp "$jar" hab.bench.ThreadStarts \
      "${THREADS:-2000}" 5 2>&1)
    echo "$round $config $(sed -n 's/^us_per_thread=//p' <<<"$out")"
  done
done
