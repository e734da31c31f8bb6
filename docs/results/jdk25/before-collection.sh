#!/usr/bin/env bash
# Young collections and unused tails at collections with and without HABs' last memory before
# a collection (HabHeap::allocate_before_collection and libhab's take of another CPU's buffer
# tail), one run each of bench/apps's applications, Parallel (or COLLECTOR), 24 MiB young
# generation, 2 threads (or THREADS): stock (-XX:-UseHAB), -XX:+UseHAB on BEFORE (a JDK without the hook and its libhab),
# -XX:+UseHAB on AFTER (with them). Counts, not times: the machine may be busy. No collection
# before each iteration (--pre-iteration-gc off): the tails counted are those of the young
# collections that eden's end brought, not of System.gc() between iterations.
#   BEFORE=target/hotspot-hab/jdk AFTER=/tmp/jdk-take docs/results/jdk25/before-collection.sh [APP...]
# Environment: THREADS (default 2), COLLECTOR (Parallel or G1, default Parallel), OPTIONS (more
# JVM flags for every run, such as -XX:-UseAdaptiveSizePolicy).
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
apps="$repo/bench/apps/target"
names=("$@"); [ ${#names[@]} = 0 ] && names=(h2 luindex lusearch jackson javac kotlinc scalac)
echo "| application | JVM | flags | young GCs | GB allocated | GCs per GB | TLAB tails at collections MiB | level waste MiB (tails at refills and collections) | foreign carves | checksum |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for app in "${names[@]}"; do
  for run in "BEFORE -XX:-UseHAB" "BEFORE -XX:+UseHAB" "AFTER -XX:+UseHAB"; do
    set -- $run
    jdk=${!1}
    # shellcheck disable=SC2086
    out=$("$jdk/bin/java" -Xshare:auto "-XX:+Use${COLLECTOR:-Parallel}GC" -Xms2g -Xmx2g -Xmn24m ${OPTIONS:-} "$2" \
          -Xlog:gc+tlab=info -cp "$apps/apps.jar:$apps/lib/*" hab.apps.Main "$app" "${THREADS:-2}" \
          --warmup 3 --iterations 2 --pre-iteration-gc off 2>&1)
    line=$(echo "$out" | grep '^hab-apps: ' | tail -1)
    exit_line=$(echo "$out" | grep 'hab-exit: ' | tail -1)
    get() { echo "$2" | grep -oE "(^| )$1=[0-9a-z.]+" | head -1 | cut -d= -f2; }
    gcs=$(get young_collections "$line"); bytes=$(get allocated_bytes "$line"); status=$(get checksum_status "$line")
    tlab=$(get tlab_gc_waste_bytes "$exit_line"); level=$(get cpu.waste_bytes "$exit_line"); foreign=$(get cpu.foreign_allocs "$exit_line")
    awk -v app="$app" -v jvm="$1" -v flags="$2" -v gcs="$gcs" -v bytes="$bytes" -v tlab="${tlab:-0}" \
        -v level="${level:-0}" -v foreign="${foreign:-0}" -v status="$status" 'BEGIN {
      gb = bytes / 1e9
      printf "| %s | %s | `%s` | %d | %.2f | %.2f | %.1f | %.1f | %d | %s |\n", app, jvm, flags, gcs, gb,
             gcs / gb, tlab / 1048576, level / 1048576, foreign, status }'
  done
done
