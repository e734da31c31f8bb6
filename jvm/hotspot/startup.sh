#!/usr/bin/env bash
# Start-up of the JDK 25 that build.sh made against Temurin 25.0.3's own: `java -version` and a
# hello-world, stock and with HABs (G1, Parallel, per-CPU LABs), ROUNDS interleaved rounds (each
# round runs every case once, in turn, so that a busy moment hits all of them). Prints a Markdown
# table: the median and the fastest wall time of each case, and the median's ratio to Temurin's.
#
#   jvm/hotspot/startup.sh        # ROUNDS=30 by default: about a minute
#
# Environment: JDK (default target/hotspot-hab/jdk), STOCK (default: Temurin 25's home), ROUNDS.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
jdk="$(realpath -m "${JDK:-$repo/target/hotspot-hab/jdk}")"
stock="${STOCK:-/usr/lib/jvm/temurin-25-jdk-amd64}"
rounds="${ROUNDS:-30}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/Hello.java" <<'JAVA'
public class Hello {
    public static void main(String[] args) {
        System.out.println("hello");
    }
}
JAVA
"$stock/bin/javac" -d "$work" "$work/Hello.java"

# NAME<tab>JAVA<tab>OPTIONS
cases=$(printf '%s\t%s\t%s\n' \
  "Temurin" "$stock/bin/java" "" \
  "built, no HAB flag" "$jdk/bin/java" "" \
  "built, G1" "$jdk/bin/java" "-XX:+UseHAB" \
  "built, Parallel" "$jdk/bin/java" "-XX:+UseParallelGC -XX:+UseHAB" \
  "built, G1" "$jdk/bin/java" "-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs")

# Milliseconds one command takes, wall time.
time_ms() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  end=$(date +%s%N)
  echo $(( (end - start) / 1000000 ))
}

for ((round = 0; round < rounds; round++)); do
  index=0
  while IFS=$'\t' read -r name java options; do
    read -r -a flags <<<"$options"
    echo "$(time_ms "$java" "${flags[@]}" -version)" >>"$work/version-$index"
    echo "$(time_ms "$java" "${flags[@]}" -cp "$work" Hello)" >>"$work/hello-$index"
    index=$((index + 1))
  done <<<"$cases"
done

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fastest() { sort -n "$1" | head -1; }
echo "$("$jdk/bin/java" -version 2>&1 | tail -1); $rounds interleaved rounds; wall times in ms"
echo
echo "| case | -version median | fastest | x Temurin | hello-world median | fastest | x Temurin |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
base_version=$(median "$work/version-0")
base_hello=$(median "$work/hello-0")
index=0
while IFS=$'\t' read -r name _ options; do
  v=$(median "$work/version-$index")
  h=$(median "$work/hello-$index")
  printf '| %s%s | %s | %s | %.2f | %s | %s | %.2f |\n' "$name" "${options:+ \`$options\`}" \
    "$v" "$(fastest "$work/version-$index")" "$(echo "$v / $base_version" | bc -l)" \
    "$h" "$(fastest "$work/hello-$index")" "$(echo "$h / $base_hello" | bc -l)"
  index=$((index + 1))
done <<<"$cases"
