#!/usr/bin/env bash
# bench/jvm's workloads (binary-trees, warehouses, chat) on the JVM that build.sh made, stock
# (-XX:-UseHAB) and with HABs (-XX:+UseHAB and HABLEVELS), alternating, ROUNDS times each;
# prints every run and a Markdown table of the medians (HAB over stock: above 1 is faster).
#
#   jvm/hotspot/workloads.sh            # after jvm/hotspot/build.sh and mvn package in bench/jvm
#
# Environment: JDK (default target/hotspot-hab/jdk), ROUNDS (3), HABLEVELS (core:1M).
# Eden is 48 MiB (-Xmn64m): large enough that the JVM keeps the levels as given (it scales down,
# with a warning, levels whose buffers would hold more than a quarter of eden; a warning fails
# this script, so that the runs are of the levels named).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
java="${JDK:-$repo/target/hotspot-hab/jdk}/bin/java"
jar="$repo/bench/jvm/target/benchmarks.jar"
rounds="${ROUNDS:-3}"
levels="${HABLEVELS:-core:1M}"
for needed in "$java" "$jar"; do
  [ -e "$needed" ] || { echo "missing $needed (jvm/hotspot/build.sh; mvn -f bench/jvm package)" >&2; exit 1; }
done
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

# run NAME METRIC CLASS ARGS...: one line "NAME<tab>CONFIG<tab>VALUE" per run into $results.
run() {
  local name=$1 metric=$2
  shift 2
  for round in $(seq "$rounds"); do
    for config in stock hab; do
      local flags=(-XX:-UseHAB)
      [ "$config" = hab ] && flags=(-XX:+UseHAB "-XX:HABLevels=$levels")
      local err
      err=$("$java" -XX:+UseParallelGC -Xms512m -Xmx512m -Xmn64m "${flags[@]}" -cp "$jar" "$@" 2>&1 >/dev/null)
      if grep -qi warning <<<"$err"; then
        echo "$name ($config): the JVM warned: $err" >&2
        exit 1
      fi
      local value
      value=$(sed -n "s/^$metric=//p" <<<"$err")
      [ -n "$value" ] || { echo "$name ($config): no $metric in: $err" >&2; exit 1; }
      echo "$name, $config, round $round: $metric=$value"
      printf '%s\t%s\t%s\n' "$name" "$config" "$value" >>"$results"
    done
  done
}

run "binary-trees (depth 16, 2 threads)" elapsed_ms hab.bench.BinaryTrees 16 2
run "warehouses (64 threads)" orders_per_sec hab.bench.Warehouses 64 20000 25
run "chat (50 rooms, 1000 threads)" messages_per_sec hab.bench.Chat 50 40

echo
echo "| workload | metric | stock (median) | HABs $levels (median) | HABs over stock |"
echo "| --- | --- | ---: | ---: | ---: |"
# Medians per workload and configuration; elapsed time is lower-is-better, so its ratio is
# stock/HAB, the rates' HAB/stock.
awk -F'\t' '
  { values[$1, $2] = values[$1, $2] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  function median(list,   v, k, i, j, t) {
    k = split(list, v, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= n; i++) {
      name = order[i]; s = median(values[name, "stock"]); h = median(values[name, "hab"])
      metric = (name ~ /binary-trees/) ? "elapsed ms" : (name ~ /warehouses/ ? "orders/s" : "messages/s")
      ratio = (name ~ /binary-trees/) ? s / h : h / s
      printf "| %s | %s | %.4g | %.4g | %.2f× |\n", name, metric, s, h, ratio
    }
  }' "$results"
