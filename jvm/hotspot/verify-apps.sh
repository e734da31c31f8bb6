#!/usr/bin/env bash
# bench/apps's real applications with every heap verified before and after each collection
# (-XX:+VerifyBeforeGC -XX:+VerifyAfterGC), in each HAB configuration under Parallel and G1:
# each application's checksum must be stock's (the harness checks it) and HABs must be on.
# One timed iteration each, no warm-up, 2 threads, a 64 MiB young generation. Prints a
# Markdown table; exit status 1 if any run failed.
#   jvm/hotspot/verify-apps.sh [APP...] > docs/results/apps/verify-2-cpus.md
# Needs the JDK jvm/hotspot/build.sh builds and `mvn -q -B package` in bench/apps.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
java="$repo/target/hotspot-hab/jdk/bin/java"
apps="$repo/bench/apps/target"
[ -x "$java" ] || { echo "$java: not built (jvm/hotspot/build.sh builds it)" >&2; exit 2; }
[ -f "$apps/apps.jar" ] || { echo "$apps/apps.jar: not built (mvn -q -B package in bench/apps)" >&2; exit 2; }
names=("$@"); [ ${#names[@]} = 0 ] && names=(h2 luindex lusearch jackson javac kotlinc scalac)
verify=(-XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC)
failures=0
echo "| collector | flags | application | young GCs | checksum | HABs on |"
echo "| --- | --- | --- | ---: | --- | --- |"
for gc in -XX:+UseParallelGC -XX:+UseG1GC; do
  for flags in "-XX:+UseHAB" "-XX:+UseHAB -XX:TLABSize=1k -XX:MinTLABSize=1k -XX:-ResizeTLAB" \
               "-XX:+UseHABCPULABs" "-XX:+UseHABCPULABs -XX:-HABFlip"; do
    for app in "${names[@]}"; do
      # shellcheck disable=SC2086
      out=$("$java" -XX:+UnlockExperimentalVMOptions "$gc" -Xms2g -Xmx2g -Xmn64m $flags "${verify[@]}" -Xlog:gc+init \
            -cp "$apps/apps.jar:$apps/lib/*" hab.apps.Main "$app" 2 --warmup 0 --iterations 1 2>&1)
      line=$(echo "$out" | grep '^hab-apps: ' | tail -1)
      status=$(echo "$line" | grep -o 'checksum_status=[a-z]*'); status=${status#checksum_status=}
      gcs=$(echo "$line" | grep -o 'young_collections=[0-9]*'); gcs=${gcs#young_collections=}
      on=no; echo "$out" | grep -q "HAB: per-CPU support" && on=yes
      mark=""
      if [ "$status" != ok ] || [ "$on" != yes ]; then
        mark="**"; failures=$((failures + 1))
        echo "$out" | grep -v '^hab-apps: ' | tail -20 >&2
      fi
      echo "| ${gc#-XX:+Use} | \`$flags\` | $app | ${gcs:-—} | $mark${status:-no result}$mark | $on |"
    done
  done
done
echo; echo "failures: $failures"
[ "$failures" = 0 ]
