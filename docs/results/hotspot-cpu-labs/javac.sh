#!/bin/bash
# The javac workload with per-CPU LABs: bench/jvm's Javac (THREADS threads each compiling the
# sources jar COMPILES times, as `hab hotspot-hab`'s grid runs it: -Xms2g -Xmx2g -Xmn1g,
# adaptive TLABs), Parallel, in interleaved rounds: stock, -XX:+UseHABCPULABs (flipping with
# TLABs) and -XX:+UseHABCPULABs -XX:-HABFlip (every cycle in per-CPU LABs). Prints compiles
# per minute and the young collections of the timed rounds. CONFIGS picks fewer runs.
# JDK=... JAR=... SOURCES=... ROUNDS=3 THREADS="2 80" COMPILES=2 CONFIGS="..." bash javac.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
jar=${JAR:-bench/jvm/target/benchmarks.jar}
sources=${SOURCES:-bench/jvm/target/javac-sources.jar}
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "== round threads config compiles_per_min collections"
for round in $(seq "${ROUNDS:-3}"); do
  for threads in ${THREADS:-2 80}; do
    for config in ${CONFIGS:-stock cpu-labs cpu-labs-always}; do
      case $config in
        stock) flags=-XX:-UseHAB ;;
        cpu-labs) flags=-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs ;;
        cpu-labs-always) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
        *) echo "unknown config $config" >&2; exit 2 ;;
      esac
      out=$(timeout 600 "$java" -XX:+UseParallelGC $flags -Xms2g -Xmx2g -Xmn1g \
        -cp "$jar" hab.bench.Javac "$sources" "$threads" "${COMPILES:-2}" 2>&1)
      rate=$(sed -n 's/^compiles_per_min=//p' <<<"$out")
      collections=$(sed -n 's/^collections=//p' <<<"$out")
      echo "$round $threads $config ${rate:-nan} ${collections:-nan}"
    done
  done
done
