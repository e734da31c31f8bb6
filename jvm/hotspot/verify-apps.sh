#!/usr/bin/env bash
# bench/apps's real applications and bench/jvm's chat with 1000 threads, with every heap
# verified before and after each collection (-XX:+VerifyBeforeGC -XX:+VerifyAfterGC) and every
# compiled TLAB refill checked (-XX:+HABVerifyCompiledRefills), in each HAB configuration under
# Parallel and G1, with compact object headers on and off, in the tiers asked for: each
# application's checksum must be stock's (the harness checks it), the chat must deliver every
# message, and HABs must be on. Applications: one timed iteration each, no warm-up, 2 threads,
# a 64 MiB young generation; the chat: 50 rooms of 20 threads, 40 messages per connection, a
# 4 MiB young generation. Prints a Markdown table; exit status 1 if any run failed.
#
#   jvm/hotspot/verify-apps.sh [PROGRAM...] > docs/results/jdk25/verify-apps-2-cpus.md
#
# PROGRAM: h2 luindex lusearch jackson javac kotlinc scalac chat (default: all). Environment:
# COLLECTORS (default "Parallel G1"), HEADERS (default "classic compact"; compact needs JDK 25),
# TIERS (default "default"; also c2, c1, interpreter), JDK (default target/hotspot-hab/jdk).
# Needs the JDK jvm/hotspot/build.sh builds, `mvn -q -B package` in bench/apps and in bench/jvm.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
java="$(realpath -m "${JDK:-$repo/target/hotspot-hab/jdk}")/bin/java"
apps="$repo/bench/apps/target"
bench_jar="$repo/bench/jvm/target/benchmarks.jar"
[ -x "$java" ] || { echo "$java: not built (jvm/hotspot/build.sh builds it)" >&2; exit 2; }
names=("$@"); [ ${#names[@]} = 0 ] && names=(h2 luindex lusearch jackson javac kotlinc scalac chat)
for name in "${names[@]}"; do
  if [ "$name" = chat ]; then
    [ -f "$bench_jar" ] || { echo "$bench_jar: not built (mvn -q -B package in bench/jvm)" >&2; exit 2; }
  else
    [ -f "$apps/apps.jar" ] || { echo "$apps/apps.jar: not built (mvn -q -B package in bench/apps)" >&2; exit 2; }
  fi
done
verify=(-XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC -XX:+HABVerifyCompiledRefills)
chat_args=(50 40)
# What the chat delivers, from the same JVM without HABs: every run must deliver as many.
delivered=""
if printf '%s\n' "${names[@]}" | grep -qx chat; then
  delivered=$("$java" -XX:-UseHAB -Xmx64m -Xmn4m -cp "$bench_jar" hab.bench.Chat "${chat_args[@]}" 2>/dev/null \
              | grep -o '[0-9]* messages delivered' | tail -1)
  [ -n "$delivered" ] || { echo "the chat did not run without HABs" >&2; exit 2; }
fi
tier_flags() {
  case "$1" in
    default) ;;
    c2) echo "-XX:-TieredCompilation" ;;
    c1) echo "-XX:TieredStopAtLevel=1" ;;
    interpreter) echo "-Xint" ;;
    *) echo "unknown tier $1 (default c2 c1 interpreter)" >&2; exit 2 ;;
  esac
}
failures=0
runs=0
started=$(date +%s)
echo "JVM: \`$("$java" -version 2>&1 | tail -1)\`; every run: \`${verify[*]}\`"
echo
echo "| collector | flags | headers | tier | program | young GCs | result | HABs on |"
echo "| --- | --- | --- | --- | --- | ---: | --- | --- |"
for gc in ${COLLECTORS:-Parallel G1}; do
  for flags in "-XX:+UseHAB" "-XX:+UseHAB -XX:TLABSize=1k -XX:MinTLABSize=1k -XX:-ResizeTLAB" \
               "-XX:+UseHABCPULABs" "-XX:+UseHABCPULABs -XX:-HABFlip"; do
    for headers in ${HEADERS:-classic compact}; do
      case "$headers" in
        classic) header_flag=-XX:-UseCompactObjectHeaders ;;
        compact) header_flag=-XX:+UseCompactObjectHeaders ;;
        *) echo "unknown headers $headers (classic compact)" >&2; exit 2 ;;
      esac
      for tier in ${TIERS:-default}; do
        for name in "${names[@]}"; do
          common=(-XX:+UnlockExperimentalVMOptions "-XX:+Use${gc}GC" "$header_flag" $(tier_flags "$tier")
                  $flags "${verify[@]}" -Xlog:gc+init)
          if [ "$name" = chat ]; then
            out=$("$java" "${common[@]}" -Xms64m -Xmx64m -Xmn4m -cp "$bench_jar" hab.bench.Chat "${chat_args[@]}" 2>&1)
            gcs=$(echo "$out" | grep -o '^collections=[0-9]*' | tail -1); gcs=${gcs#collections=}
            status=failed
            echo "$out" | grep -q "$delivered" && status="$delivered"
            ok=$([ "$status" = "$delivered" ] && echo yes)
          else
            out=$("$java" "${common[@]}" -Xms2g -Xmx2g -Xmn64m -cp "$apps/apps.jar:$apps/lib/*" \
                  hab.apps.Main "$name" 2 --warmup 0 --iterations 1 2>&1)
            line=$(echo "$out" | grep '^hab-apps: ' | tail -1)
            status=$(echo "$line" | grep -o 'checksum_status=[a-z]*'); status=${status#checksum_status=}
            gcs=$(echo "$line" | grep -o 'young_collections=[0-9]*'); gcs=${gcs#young_collections=}
            ok=$([ "$status" = ok ] && echo yes)
            status="checksum ${status:-no result}"
          fi
          on=no; echo "$out" | grep -q "HAB: per-CPU support" && on=yes
          runs=$((runs + 1))
          mark=""
          if [ "$ok" != yes ] || [ "$on" != yes ]; then
            mark="**"; failures=$((failures + 1))
            echo "$out" | grep -v '^hab-apps: ' | tail -20 >&2
          fi
          echo "| $gc | \`$flags\` | $headers | $tier | $name | ${gcs:-—} | $mark$status$mark | $on |"
        done
      done
    done
  done
done
echo
echo "$runs runs, $failures failed, $(( $(date +%s) - started )) s"
[ "$failures" = 0 ]
