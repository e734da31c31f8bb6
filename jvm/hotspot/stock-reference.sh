#!/usr/bin/env bash
# The stock reference: the JDK 25 that build.sh made, with no HAB flag, against Temurin 25.0.3 on
# the same workloads, so that "stock" in every HAB table means Temurin's own JVM. Workloads: the
# javac workload (bench/jvm, Parallel, 2 threads), the chat with 1000 threads (50 rooms, 64 MiB
# heap, 4 MiB young generation, Parallel and G1) and every application of bench/apps (G1,
# HotSpot's default, 2 threads; WARMUP untimed and ITERATIONS timed iterations, the median
# taken). ROUNDS interleaved rounds: each round runs each workload on Temurin, then on the built
# JDK. Prints a Markdown table: each workload's figure on both (their medians over the rounds),
# the built JDK's time as a multiple of Temurin's (for rates, Temurin's rate over the built
# JDK's), the range of that multiple over the rounds, and the applications' checksum status;
# then the geometric mean of the multiples.
#
#   jvm/hotspot/stock-reference.sh     # ROUNDS=3: about 25 minutes on 2 CPUs
#
# Environment: JDK (default target/hotspot-hab/jdk), STOCK (default: Temurin 25's home), ROUNDS,
# WARMUP (default 5), ITERATIONS (default 3), APPS (default every application).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
jdk="$(realpath -m "${JDK:-$repo/target/hotspot-hab/jdk}")"
stock="${STOCK:-/usr/lib/jvm/temurin-25-jdk-amd64}"
rounds="${ROUNDS:-3}"
bench="$repo/bench/jvm/target/benchmarks.jar"
apps_cp="$repo/bench/apps/target/apps.jar:$repo/bench/apps/target/lib/*"
for needed in "$bench" "$repo/bench/apps/target/apps.jar" "$jdk/bin/java" "$stock/bin/java"; do
  [ -e "$needed" ] || { echo "missing $needed (mvn package in bench/jvm and bench/apps; jvm/hotspot/build.sh)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# NAME<tab>KEY (what the run prints)<tab>KIND (time: lower is better; rate: higher)<tab>ARGUMENTS
workloads=$(printf '%s\t%s\t%s\t%s\n' \
  "javac, Parallel, 2 threads" elapsed_ms time \
  "-XX:+UseParallelGC -cp $bench hab.bench.Javac $repo/bench/jvm/target/javac-sources.jar 2 40" \
  "chat, 1000 threads, Parallel" messages_per_sec rate \
  "-XX:+UseParallelGC -Xms64m -Xmx64m -Xmn4m -cp $bench hab.bench.Chat 50 40" \
  "chat, 1000 threads, G1" messages_per_sec rate \
  "-XX:+UseG1GC -Xms64m -Xmx64m -Xmn4m -cp $bench hab.bench.Chat 50 40")
for app in ${APPS:-h2 luindex lusearch jackson javac kotlinc scalac}; do
  workloads+=$'\n'"$(printf '%s\t%s\t%s\t%s' "bench/apps $app, G1, 2 threads" median_ms time \
    "-Xms2g -Xmx2g -cp $apps_cp hab.apps.Main $app 2 --warmup ${WARMUP:-5} --iterations ${ITERATIONS:-3}")"
done

# The value of `key=` in a run's output, or nothing.
value_of() { grep -oE "(^| )$1=[0-9.]+" | tail -1 | sed 's/.*=//'; }

failures=0
for ((round = 0; round < rounds; round++)); do
  index=0
  while IFS=$'\t' read -r name key kind arguments; do
    read -r -a args <<<"$arguments"
    for side in stock built; do
      java="$stock/bin/java"
      [ "$side" = built ] && java="$jdk/bin/java"
      output=$("$java" "${args[@]}" 2>&1) || { echo "$name on $side failed: $output" >&2; failures=$((failures + 1)); continue; }
      v=$(value_of "$key" <<<"$output")
      [ -n "$v" ] || { echo "$name on $side printed no $key" >&2; failures=$((failures + 1)); continue; }
      echo "$v" >>"$work/$index-$side"
      grep -q "checksum_status=" <<<"$output" && grep -o "checksum_status=[a-z]*" <<<"$output" >>"$work/$index-checksums"
    done
    index=$((index + 1))
  done <<<"$workloads"
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "$("$jdk/bin/java" -version 2>&1 | tail -1) against $("$stock/bin/java" -version 2>&1 | tail -1); $rounds interleaved rounds"
echo
echo "| workload | figure | Temurin | built, no HAB flag | x Temurin's time | range over rounds | checksums |"
echo "| --- | --- | ---: | ---: | ---: | --- | --- |"
index=0
log_sum=0
count=0
while IFS=$'\t' read -r name key kind _; do
  if [ ! -s "$work/$index-stock" ] || [ ! -s "$work/$index-built" ]; then
    echo "| $name | $key | - | - | - | - | failed |"
    index=$((index + 1))
    continue
  fi
  s=$(median "$work/$index-stock")
  b=$(median "$work/$index-built")
  # Per round, the built JDK's time over Temurin's (a rate inverted).
  ratios=$(paste "$work/$index-stock" "$work/$index-built" |
    awk -v kind="$kind" '{ print (kind == "time") ? $2 / $1 : $1 / $2 }' | sort -g)
  ratio=$(awk -v kind="$kind" -v s="$s" -v b="$b" 'BEGIN { printf "%.3f", (kind == "time") ? b / s : s / b }')
  range="$(head -1 <<<"$ratios" | xargs printf '%.3f')-$(tail -1 <<<"$ratios" | xargs printf '%.3f')"
  checks="-"
  [ -s "$work/$index-checksums" ] && checks="$(grep -c ok "$work/$index-checksums") of $(wc -l <"$work/$index-checksums") ok"
  echo "| $name | $key | $s | $b | $ratio | $range | $checks |"
  log_sum=$(awk -v a="$log_sum" -v r="$ratio" 'BEGIN { print a + log(r) }')
  count=$((count + 1))
  index=$((index + 1))
done <<<"$workloads"
echo
awk -v a="$log_sum" -v n="$count" 'BEGIN { printf "Geometric mean of the built JDK'"'"'s time x Temurin'"'"'s over %d workloads: %.3f\n", n, exp(a / n) }'
[ "$failures" = 0 ]
