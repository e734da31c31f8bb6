#!/usr/bin/env bash
# The flip after three cycles over its bound, under HotSpot's heap verification: 200 threads in
# fixed 128 KiB TLABs (jvm/hotspot/test/ExplicitCollections.java, 3 s) must flip to per-CPU LABs,
# in every tier, both collectors, under JFR's default recording and without glibc's rseq
# registration, with no verification failure; then the chat (below), which checks its own
# deliveries. After jvm/hotspot/build.sh:
#   docs/results/apps/flip-verify.sh > docs/results/apps/flip-verify.log
cd "$(dirname "$0")/../../.."
java=target/hotspot-hab/jdk/bin/java
# The tiers and production conditions each program runs in.
variants=("-Xint" "-XX:TieredStopAtLevel=1" "-XX:-TieredCompilation" "default" "jfr" "rseq0")
# Sets extra (JVM flags) and envs (environment) for one of those variants.
condition() {
  extra=(); envs=()
  case "$1" in
    default) ;;
    jfr) extra=(-XX:StartFlightRecording:filename="${TMPDIR:-/tmp}/flip-verify.jfr",settings=default) ;;
    rseq0) envs=(GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
    *) extra=("$1") ;;
  esac
}
for collector in Parallel G1; do
  for variant in "${variants[@]}"; do
    condition "$variant"
    out="$(env "${envs[@]}" timeout 150 "$java" -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:TLABSize=128k -XX:-ResizeTLAB \
      -XX:+UseHABCPULABs -XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC \
      -Xlog:gc+tlab=info "${extra[@]}" jvm/hotspot/test/ExplicitCollections.java 200 1 3000 2>&1)"
    rc=$?
    echo "$collector $variant: rc=$rc $(grep -oE 'explicit-collections: .*|use_hab=[0-9]|collections=[0-9]+ |flips=[0-9]+|cycles_in_cpu_labs=[0-9]+' <<<"$out" | tr '\n' ' ') verify-failures=$(grep -ci 'verify.*fail\|fatal\|SIGSEGV' <<<"$out")"
  done
done
# Then a program that checks its own data: bench/jvm's chat, 1000 threads (50 rooms, 10 messages
# per connection: 190 000 deliveries, each counted by its receiver), -Xmn4m, flipping to per-CPU
# LABs after three cycles, every heap verified, the same tiers and conditions.
for collector in Parallel G1; do
  for variant in "${variants[@]}"; do
    condition "$variant"
    out="$(env "${envs[@]}" timeout 300 "$java" -XX:+Use${collector}GC -Xms64m -Xmx64m -Xmn4m \
      -XX:+UseHABCPULABs -XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC \
      -Xlog:gc+tlab=info "${extra[@]}" -cp bench/jvm/target/benchmarks.jar hab.bench.Chat 50 10 2>&1)"
    rc=$?
    echo "chat $collector $variant: rc=$rc $(grep -oE '[0-9]+ messages delivered|use_hab=[0-9]|flips=[0-9]+|cycles_in_cpu_labs=[0-9]+' <<<"$out" | sort -u | tr '\n' ' ') verify-failures=$(grep -ci 'verify.*fail\|fatal\|SIGSEGV' <<<"$out")"
  done
done
