#!/usr/bin/env bash
# The flip after three cycles over its bound, under HotSpot's heap verification: 200 threads in
# fixed 128 KiB TLABs (jvm/hotspot/test/ExplicitCollections.java, 3 s) must flip to per-CPU LABs,
# in every tier, both collectors, under JFR's default recording and without glibc's rseq
# registration, with no verification failure. After jvm/hotspot/build.sh:
#   docs/results/apps/flip-verify.sh > docs/results/apps/flip-verify.log
cd "$(dirname "$0")/../../.."
java=target/hotspot-hab/jdk/bin/java
for collector in Parallel G1; do
  for variant in "-Xint" "-XX:TieredStopAtLevel=1" "-XX:-TieredCompilation" "default" "jfr" "rseq0"; do
    extra=(); envs=()
    case "$variant" in
      default) ;;
      jfr) extra=(-XX:StartFlightRecording:filename="${TMPDIR:-/tmp}/flip-verify.jfr",settings=default) ;;
      rseq0) envs=(GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
      *) extra=("$variant") ;;
    esac
    out="$(env "${envs[@]}" timeout 150 "$java" -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:TLABSize=128k -XX:-ResizeTLAB \
      -XX:+UseHABCPULABs -XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC \
      -Xlog:gc+tlab=info "${extra[@]}" jvm/hotspot/test/ExplicitCollections.java 200 1 3000 2>&1)"
    rc=$?
    echo "$collector $variant: rc=$rc $(grep -oE 'explicit-collections: .*|use_hab=[0-9]|collections=[0-9]+ |flips=[0-9]+|cycles_in_cpu_labs=[0-9]+' <<<"$out" | tr '\n' ' ') verify-failures=$(grep -ci 'verify.*fail\|fatal\|SIGSEGV' <<<"$out")"
  done
done
