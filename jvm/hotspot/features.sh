#!/usr/bin/env bash
# JDK 25's own features under HABs, on the JVM that build.sh made: compact object headers and
# virtual threads. jvm/hotspot/test/Headers.java makes objects of every shape (instances of 0 to
# 6 fields, arrays of four element types, some over HABCPULABObjectLimit) and checks each one's
# class, length, zeroed fields, identity hash and lock at once and later; by a few platform
# threads, then by many thousands of virtual threads that yield often (each may resume on
# another carrier, in another TLAB, on another CPU). Each run: Parallel and G1; -XX:+UseHAB,
# -XX:+UseHABCPULABs (the flip, and every cycle with -XX:-HABFlip); compact headers on and off;
# the default tiers, C2 alone, C1 alone and the interpreter; every heap verified before and after
# each collection (-XX:+VerifyBeforeGC -XX:+VerifyAfterGC) and every compiled TLAB refill
# checked (-XX:+HABVerifyCompiledRefills). It must print Temurin's checksum. Prints a Markdown
# table; exit 1 if any run failed.
#
#   jvm/hotspot/features.sh      # about 10 minutes on 2 CPUs
#
# Environment: JDK (default target/hotspot-hab/jdk), STOCK (default: Temurin 25's bin/java),
# COLLECTORS (default "Parallel G1"), TIERS (default "default c2 c1 interpreter"), HEADERS
# (default "compact classic"), THREADS ("platform virtual"), JFR (on: every run under JFR's
# default recording, which samples allocations).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
java="$(realpath -m "${JDK:-$repo/target/hotspot-hab/jdk}")/bin/java"
stock="${STOCK:-/usr/lib/jvm/temurin-25-jdk-amd64/bin/java}"
[ -x "$java" ] || { echo "missing $java (jvm/hotspot/build.sh)" >&2; exit 1; }
[ -x "$stock" ] || { echo "missing $stock (STOCK names a JDK 25's java)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$(dirname "$java")/javac" -d "$work/classes" "$here/test/Headers.java" || exit 1

# What each kind of thread runs: THREADS OBJECTS_PER_THREAD YIELD_EVERY.
declare -A shape=([platform]="4 120000 0" [virtual]="3000 150 20")
declare -A expected
for threads in ${THREADS:-platform virtual}; do
  # shellcheck disable=SC2086
  expected[$threads]=$("$stock" -cp "$work/classes" Headers "$threads" ${shape[$threads]} | grep -o 'checksum 0x[0-9a-f]*')
done

failures=0
runs=0
started=$(date +%s)
echo "| collector | flags | headers | tier | threads | exit | checksum | collections |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for collector in ${COLLECTORS:-Parallel G1}; do
  for hab in "-XX:+UseHAB" "-XX:+UseHABCPULABs" "-XX:+UseHABCPULABs -XX:-HABFlip"; do
    for headers in ${HEADERS:-compact classic}; do
      header_flag=-XX:-UseCompactObjectHeaders
      [ "$headers" = compact ] && header_flag=-XX:+UseCompactObjectHeaders
      for tier in ${TIERS:-default c2 c1 interpreter}; do
        tier_flags=()
        case "$tier" in
          default) ;;
          c2) tier_flags=(-XX:-TieredCompilation) ;;
          c1) tier_flags=(-XX:TieredStopAtLevel=1) ;;
          interpreter) tier_flags=(-Xint) ;;
        esac
        for threads in ${THREADS:-platform virtual}; do
          read -r -a hab_flags <<<"$hab"
          rm -f "$work"/hs_err*
          observer=()
          [ "${JFR:-off}" = on ] && observer=("-XX:StartFlightRecording:filename=$work/run.jfr,settings=default")
          # shellcheck disable=SC2086
          output=$(cd "$work" && "$java" -XX:+UnlockExperimentalVMOptions -XX:+UnlockDiagnosticVMOptions \
            "-XX:+Use${collector}GC" -Xmx256m -Xmn4m "${hab_flags[@]}" "$header_flag" "${tier_flags[@]}" \
            -XX:+VerifyBeforeGC -XX:+VerifyAfterGC -XX:+HABVerifyCompiledRefills -Xlog:gc+tlab=info "${observer[@]}" \
            -cp "$work/classes" Headers "$threads" ${shape[$threads]} 2>&1)
          status=$?
          runs=$((runs + 1))
          sum=$(grep -o 'checksum 0x[0-9a-f]*' <<<"$output")
          collections=$(grep -o 'hab-exit: use_hab=1 collections=[0-9]*' <<<"$output" | grep -o '[0-9]*$')
          problem=""
          if [ "$status" != 0 ] || ls "$work"/hs_err* >/dev/null 2>&1; then
            problem="failed: $(grep -m1 -E 'wrong object|Error|Verify|fatal' <<<"$output")"
          elif [ "$sum" != "${expected[$threads]}" ]; then
            problem="not Temurin's ${expected[$threads]}"
          elif [ -z "$collections" ] || [ "$collections" = 0 ]; then
            problem="no collection"
          fi
          echo "| $collector | \`$hab\` | $headers | $tier | $threads | $status | ${sum#checksum } | ${collections:-?}${problem:+ — **$problem**} |"
          [ -n "$problem" ] && failures=$((failures + 1))
        done
      done
    done
  done
done
echo
echo "$runs runs in $(( $(date +%s) - started )) s, $failures failed${JFR:+ (JFR $JFR)}"
[ "$failures" = 0 ]
