#!/bin/bash
# Garthwaite's Table 2 inside HotSpot: bench/jvm's chat (rooms of 20 threads that block on
# their inboxes between small allocations) under Parallel, stock adaptive TLABs against
# -XX:-UseTLAB (a CAS on eden's top per object), -XX:+UseHAB, -XX:+UseHABCPULABs (cycles
# flipping between per-CPU LABs and TLABs) and -XX:+UseHABCPULABs -XX:-HABFlip (every cycle in
# per-CPU LABs): young collections and messages per second, over threads x young size, in
# interleaved rounds. COLLECTOR=g1 runs them under G1. A configuration's name ending in -own
# runs it with glibc's rseq registration off (GLIBC_TUNABLES=glibc.pthread.rseq=0: Hab
# registers its own area per thread), in -enosys under a seccomp filter that refuses rseq
# (tools/without-rseq, built into target/ on the first use).
# JDK=... JAR=... COLLECTOR=parallel ROUNDS=2 ROOMS="1 5 50 200" YOUNG="4 16 64" HEAP=256
#   CONFIGS="..." bash run.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
case ${COLLECTOR:-parallel} in
  parallel) gc=-XX:+UseParallelGC ;;
  g1) gc=-XX:+UseG1GC ;;
  *) echo "unknown collector ${COLLECTOR} (parallel, g1)" >&2; exit 2 ;;
esac
jar=${JAR:-bench/jvm/target/benchmarks.jar}
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "collector: $gc"
echo "== round threads young_mib config messages_per_sec collections"
for round in $(seq "${ROUNDS:-2}"); do
  for rooms in ${ROOMS:-5 50 200}; do
    for young in ${YOUNG:-4 16 64}; do
      for config in ${CONFIGS:-stock no-tlab hab cpu-labs cpu-labs-always}; do
        wrap=()
        case $config in
          *-own) wrap=(env GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
          *-enosys)
            [ -x target/without-rseq ] || cc -O2 -Wall -Wextra -Werror -o target/without-rseq tools/without-rseq.c
            wrap=(target/without-rseq enosys) ;;
        esac
        case ${config%-own} in
          stock) flags=-XX:-UseHAB ;;
          no-tlab) flags=-XX:-UseTLAB ;;
          hab) flags=-XX:+UseHAB ;;
          cpu-labs) flags=-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs ;;
          cpu-labs-always) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
          hab-enosys) flags=-XX:+UseHAB ;;
          cpu-labs-enosys) flags=-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs ;;
          *) echo "unknown configuration $config" >&2; exit 2 ;;
        esac
        out=$(timeout 120 "${wrap[@]}" "$java" $gc $flags -Xms${HEAP:-256}m -Xmx${HEAP:-256}m -Xmn${young}m \
          -cp "$jar" hab.bench.Chat "$rooms" 40 2>&1)
        rate=$(sed -n 's/^messages_per_sec=//p' <<<"$out")
        collections=$(sed -n 's/^collections=//p' <<<"$out")
        echo "$round $((rooms * 20)) $young $config ${rate:-nan} ${collections:-nan}"
      done
    done
  done
done
