#!/usr/bin/env bash
# Is every cycle's extra time in `jackson` (16 threads) the per-object path? A dose test: stock,
# every cycle in per-CPU LABs from C2's fast path (about 2 ns more per object than a TLAB bump
# in AllocObject.bytes16), and every cycle from C2's slow call only (about 2 ns more again).
# If the path is the cost, the slow call adds about as much again; if the compilation is, it
# does not. `limit16k` is every cycle with objects up to 16 KiB in per-CPU LABs
# (-XX:HABCPULABObjectLimit=16384): fewer objects the runtime leaves to the collector, each
# after a runtime call. `habs` is -XX:+UseHAB, `flip` the per-CPU LAB mode flipping (TLABs
# while they leave little), `flip-slow` the same with C2's slow call only: under JFR
# (JFR=on, its default recording) they tell whether the flip's cycles in TLABs pay for the
# per-CPU LAB stub that C2 calls first. COLLECTOR=parallel|g1. Configurations alternate within
# a round; prints each run's harness line and the per-CPU LAB summary, then per round the
# mutator's milliseconds per GB allocated ((timed total - gc_ms) / GB) and each
# configuration's ratio to the stock run beside it.
#   ROUNDS=5 THREADS=16 [CONFIGS="stock fast slow"] [COLLECTOR=g1] [JFR=on] \
#     docs/results/apps/jackson-path.sh > LOG
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
java="$repo/target/hotspot-hab/jdk/bin/java"
apps="$repo/bench/apps/target"
[ -x "$java" ] || { echo "$java: not built (jvm/hotspot/build.sh builds it)" >&2; exit 2; }
[ -f "$apps/apps.jar" ] || { echo "$apps/apps.jar: not built (mvn -q -B package in bench/apps)" >&2; exit 2; }
rounds=${ROUNDS:-5}; threads=${THREADS:-16}; app=${APP:-jackson}
case ${COLLECTOR:-parallel} in
  parallel) collector=-XX:+UseParallelGC ;;
  g1) collector=-XX:+UseG1GC ;;
  *) echo "COLLECTOR=$COLLECTOR: parallel or g1" >&2; exit 2 ;;
esac
observer=()
case ${JFR:-off} in
  off) ;;
  on) observer=("-XX:StartFlightRecording:filename=$(mktemp -d)/jackson.jfr,settings=default") ;;
  *) echo "JFR=$JFR: on or off" >&2; exit 2 ;;
esac
declare -A flags=(
  [stock]="-XX:-UseHAB"
  [habs]="-XX:+UseHAB"
  [flip]="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs"
  [flip-slow]="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:+UnlockDiagnosticVMOptions -XX:-HABCompiledCPULABPath"
  [fast]="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip"
  [slow]="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip -XX:+UnlockDiagnosticVMOptions -XX:-HABCompiledCPULABPath"
  [limit16k]="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip -XX:HABCPULABObjectLimit=16384"
)
read -r -a configs <<<"${CONFIGS:-stock fast slow}"
for config in "${configs[@]}"; do
  [ -n "${flags[$config]:-}" ] || { echo "unknown configuration $config (${!flags[*]})" >&2; exit 2; }
done
[ "${configs[0]}" = stock ] || { echo "CONFIGS must start with stock" >&2; exit 2; }
echo "# $app, $threads threads, $collector, JFR ${JFR:-off}, -Xms2g -Xmx2g -Xmn24m, --warmup 10 --iterations 8, $(nproc) CPUs"
for config in "${configs[@]}"; do echo "# $config: ${flags[$config]}"; done
runs=$(mktemp)
for round in $(seq "$rounds"); do
  for config in "${configs[@]}"; do
    # shellcheck disable=SC2086
    out=$("$java" "$collector" -Xms2g -Xmx2g -Xmn24m ${flags[$config]} "${observer[@]}" -Xlog:gc+tlab=info:stderr \
          -cp "$apps/apps.jar:$apps/lib/*" hab.apps.Main "$app" "$threads" --warmup 10 --iterations 8 2>&1)
    line=$(echo "$out" | grep '^hab-apps: ' | tail -1)
    echo "$round $config $line"
    echo "$out" | grep -E 'HAB CPU LABs: |HAB flip: [0-9]+ cycles' | sed "s/^.*\] HAB /$round $config   HAB /"
    echo "$round $config $line" >>"$runs"
  done
done
echo
echo "## Per round: mutator ms per GB allocated, and × the round's stock"
python3 - "$runs" "${configs[@]}" <<'PY'
import math, re, sys
rows = {}
for text in open(sys.argv[1]):
    round_, config = text.split()[:2]
    fields = dict(re.findall(r'(\w+)=(\S+)', text))
    if fields.get('checksum_status') != 'ok':
        print(round_, config, 'failed:', text.strip()); continue
    total = sum(int(ms) for ms in fields['iteration_ms'].split(','))
    per_gb = (total - int(fields['gc_ms'])) / (int(fields['allocated_bytes']) / 1e9)
    rows.setdefault(round_, {})[config] = (total, per_gb)
configs = sys.argv[2:]
ratios = {config: [] for config in configs[1:]}
for round_, by_config in sorted(rows.items(), key=lambda kv: int(kv[0])):
    stock = by_config.get('stock')
    cells = []
    for config in configs:
        if config not in by_config: cells.append(f'{config} —'); continue
        total, per_gb = by_config[config]
        cell = f'{config} total {total:6d} ms, mutator {per_gb:6.1f} ms/GB'
        if stock and config != 'stock':
            ratio = per_gb / stock[1]; ratios[config].append(ratio); cell += f' ({ratio:.2f}×)'
        cells.append(cell)
    print(round_, ' | '.join(cells))
for config, values in ratios.items():
    if values:
        geomean = math.exp(sum(map(math.log, values)) / len(values))
        print(f'{config}: mutator ms/GB × stock per round {", ".join(f"{v:.2f}" for v in values)}; '
              f'geomean {geomean:.3f}, median {sorted(values)[len(values) // 2]:.2f}')
PY
rm -f "$runs"
