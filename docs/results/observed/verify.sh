#!/usr/bin/env bash
# Warehouses (8 threads, 20 000 orders, -Xmn16m) with every heap verified, in each tier and
# collector, under JFR's default recording and the JVMTI sampler (jvm/hotspot/test/sampler.c at
# 512 KiB), with glibc's rseq registration and without it: the checksum must be stock's.
#   docs/results/observed/verify.sh > docs/results/observed/verify-2-cpus.md
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
jdk="$repo/target/hotspot-hab/jdk"; java="$jdk/bin/java"; jar="$repo/bench/jvm/target/benchmarks.jar"
agent="$(mktemp -d)/libsampler.so"
cc -shared -fPIC -O2 -Wall -Wextra -Werror -I"$jdk/include" -I"$jdk/include/linux" \
  "$repo/jvm/hotspot/test/sampler.c" -lpthread -o "$agent" || exit 1
program=(-Xmn16m -cp "$jar" hab.bench.Warehouses 8 20000 50)
verify=(-XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC)
failures=0
echo "| collector | tier | flags | observer | rseq | checksum | HABs on |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for gc in -XX:+UseParallelGC -XX:+UseG1GC; do
  stock=$("$java" "$gc" "${program[@]}" 2>&1 | grep -o 'checksum 0x[0-9a-f]*' | sort -u)
  for tier in -Xint -XX:TieredStopAtLevel=1 -XX:-TieredCompilation; do
    for flags in "-XX:+UseHAB -XX:TLABSize=1k -XX:MinTLABSize=1k -XX:-ResizeTLAB" \
                 "-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs" "-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip"; do
      for observer in jfr jvmti; do
        for rseq in glibc off; do
          obs=(-XX:StartFlightRecording:filename=/tmp/hab-verify.jfr,settings=default)
          [ "$observer" = jvmti ] && obs=(-agentpath:"$agent"=interval=524288)
          env=(); [ "$rseq" = off ] && env=(GLIBC_TUNABLES=glibc.pthread.rseq=0)
          # shellcheck disable=SC2086
          out=$(env "${env[@]}" "$java" "$gc" "$tier" $flags "${obs[@]}" "${verify[@]}" \
                -Xlog:gc+init "${program[@]}" 2>&1)
          sum=$(echo "$out" | grep -o 'checksum 0x[0-9a-f]*' | sort -u)
          on=no; echo "$out" | grep -q "HAB: per-CPU support" && on=yes
          mark=""; { [ "$sum" != "$stock" ] || [ "$on" != yes ]; } && { mark="**"; failures=$((failures + 1)); }
          echo "| ${gc#-XX:+Use} | $tier | \`$flags\` | $observer | $rseq | $mark${sum#checksum }$mark (stock ${stock#checksum }) | $on |"
        done
      done
    done
  done
done
echo; echo "failures: $failures"
[ "$failures" = 0 ]
