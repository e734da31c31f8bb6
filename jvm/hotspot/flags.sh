#!/usr/bin/env bash
# HotSpot's HAB flags under bad values, on the JVM that build.sh made: each case starts the VM
# with -XX:+UseHAB and its flags (and -XX:+UseParallelGC where they name no collector), and checks how it ends (a clean start-up
# error with a message naming the flag, or a run that says what it did with HABs) and that it never crashes (no signal, no
# hs_err file). Prints a Markdown table of what each case printed; exit 1 if any case failed.
#
#   jvm/hotspot/flags.sh                 # after jvm/hotspot/build.sh (which runs it)
#   jvm/hotspot/flags.sh --environments  # the HAB flags where rseq is not glibc's, or refused
#
# --environments runs instead a verified many-threaded program (Warehouses, 16 threads, every
# heap verified before and after each collection) in each environment a JVM meets: glibc's
# rseq registration, glibc's registration off (GLIBC_TUNABLES=glibc.pthread.rseq=0: Hab's own),
# and a kernel that refuses rseq (tools/without-rseq: a seccomp filter answering ENOSYS, then
# EPERM); under Parallel and G1; with -XX:+UseHAB, -XX:+UseHABCPULABs (the flip) and every cycle
# in per-CPU LABs (-XX:-HABFlip); in the default tiers,
# C2 alone, C1 alone and the interpreter. Each run must start, say which registration and CPU id
# it uses, and print stock's checksum (the same program without HAB flags). Then native threads
# that attach and detach mid-flight allocate in per-CPU LABs (test/attach.c), every heap
# verified, and an explicit -XX:HABCpuId=rseq must be refused where the kernel refuses rseq.
# About 15 minutes.
#
# Environment: JDK (default target/hotspot-hab/jdk); ENVIRONMENTS (default "glibc own enosys
# eperm"); TIERS (default "default c2 c1 interpreter").
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
java="$(realpath -m "${JDK:-$repo/target/hotspot-hab/jdk}")/bin/java"
[ -x "$java" ] || { echo "missing $java (jvm/hotspot/build.sh)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# FLAGS (separated by spaces)<tab>EXPECTED (run: the VM starts; fail: start-up fails)<tab>TEXT it prints
cases=$(cat <<'CASES'
-XX:HABLevels=	fail	-XX:HABLevels is empty
-XX:HABLevels:=	fail	-XX:HABLevels is empty
-XX:HABCpuId=	fail	-XX:HABCpuId is empty
-XX:HABLevels=core:1M,	fail	has an empty entry
-XX:HABLevels=,core:1M	fail	has an empty entry
-XX:HABLevels=auto,	fail	stands alone
-XX:HABLevels=auto,auto	fail	stands alone
-XX:HABLevels=banana	fail	-XX:HABLevels=banana
-XX:HABLevels=core:-1M	fail	-XX:HABLevels=core:-1M
-XX:HABLevels=core:99999999999999999999	fail	-XX:HABLevels=core:99999999999999999999
-XX:HABLevels=core:1T	run	does not fit eden
-XX:HABLevels=cpu:8	fail	must hold at least 4 smallest fillers
-XX:HABLevels=cpu:24	fail	must hold at least 4 smallest fillers
-XX:HABLevels=cpu:1K	fail	smaller than the smallest TLAB
-XX:HABLevels=core:1M,cpu:64K	fail	list levels lowest first
-XX:HABCpuId=sundial	fail	-XX:HABCpuId=sundial
-XX:HABCpuId=-1	fail	-XX:HABCpuId=-1
-XX:HABLibrary=/nonexistent/libhab.so.1	fail	cannot load /nonexistent/libhab.so.1
-XX:HABLibrary=	run	HAB: levels
-XX:HABLevels=auto	run	HAB: levels
-XX:HABLevels=AUTO	fail	-XX:HABLevels=AUTO
-XX:HABCpuId=getcpu	run	CPU id getcpu
-XX:HABCpuId=auto	run	HAB: per-CPU support: restartable per-CPU buffers
-XX:HABCpuId=rseq	run	CPU id rseq
-Xmx4m	run	HAB: levels
-Xmn1m -XX:HABLevels=cpu:256K,core:2M	run	does not fit eden of
-XX:+UseG1GC	run	over G1 eden regions
-XX:+UseG1GC -Xmx64m -Xmn4m -XX:HABLevels=cpu:256K,core:2M	run	does not fit G1 eden regions
-XX:+UseG1GC -Xmx16m	run	over G1 eden regions
-XX:+UseG1GC -Xlog:disable -XX:HABLevels=core:1T	run	does not fit G1 eden regions
-XX:+UseSerialGC	run	not serial gc; HABs turned off
-XX:-UseTLAB	run	-XX:-UseTLAB turns them off; HABs turned off
-XX:+UseHABCPULABs	run	cycles flip between them and TLABs
-XX:+UseHABCPULABs -XX:-HABFlip	run	allocates instances of up to 1024 bytes in per-CPU LABs
-XX:+UseHABCPULABs -XX:HABCpuId=getcpu	run	per-CPU LABs turned off
-XX:+UseHABCPULABs -XX:HABLevels=core:1M	run	per-CPU LABs turned off
-XX:+UseHABCPULABs -XX:+UseG1GC	run	cycles flip between them and TLABs
-XX:+UseHABCPULABs -XX:+UseSerialGC	run	works with the Parallel and G1 collectors
-XX:+UseHABCPULABs -XX:-UseTLAB	run	HABs turned off
-XX:+UseHABCPULABs -XX:HABCPULABObjectLimit=8	fail	HABCPULABObjectLimit
-XX:+UseHABCPULABs -XX:-HABFlip	run	C2 tries objects of up to 1024 bytes in per-CPU LABs before its slow call
-XX:+UseHABCPULABs -XX:+UnlockDiagnosticVMOptions -XX:-HABCompiledCPULABPath	run	C2 tries per-CPU LABs in its slow call only
-XX:+UseHABCPULABs -XX:+ZeroTLAB	run	the interpreter and C1 allocate through the runtime
-XX:HABLevels=cpu:256K,core:2M	run	C2 refills TLABs for instances from per-CPU buffers
-XX:HABLevels=core:1M	run	C2 refills TLABs through the runtime
-XX:-HABCompiledRefill	run	through the runtime: -XX:-HABCompiledRefill
-XX:+ZeroTLAB	run	ZeroTLAB zeroes each new TLAB whole
-XX:TLABRefillWasteFraction=10	run	is not a power of two
CASES
)

# JDK 25 refuses HAB flags where HABs cannot work (JDK 17 warns and turns HABs off), with each
# collector it has.
if "$java" -version 2>&1 | grep -q 'version "25'; then
  gcs="HABs work with the Parallel and G1 collectors (-XX:+UseParallelGC, -XX:+UseG1GC), not"
  cases=$(grep -v -- '-XX:+UseSerialGC\|-XX:-UseTLAB' <<<"$cases")
  for gc in "SerialGC	serial gc" "ShenandoahGC	shenandoah gc" "ZGC	z gc" "EpsilonGC	epsilon gc"; do
    cases+=$'\n'"-XX:+Use${gc%%	*}"$'\t'"fail"$'\t'"Error: -XX:+UseHAB: $gcs ${gc#*	}"
    cases+=$'\n'"-XX:+UseHABCPULABs -XX:+Use${gc%%	*}"$'\t'"fail"$'\t'"Error: -XX:+UseHABCPULABs: $gcs ${gc#*	}"
  done
  cases+=$'\n'"-XX:-UseTLAB"$'\t'"fail"$'\t'"Error: -XX:+UseHAB: HABs refill TLABs, and -XX:-UseTLAB turns them off"
  cases+=$'\n'"-XX:+UseHABCPULABs -XX:-UseTLAB"$'\t'"fail"$'\t'"Error: -XX:+UseHABCPULABs: HABs refill TLABs"
  cases+=$'\n'"-XX:+UseHABCPULABs -XX:+UseCompactObjectHeaders"$'\t'"run"$'\t'"cycles flip between them and TLABs"
fi

# Values longer than any buffer the start-up code keeps (a path, the auto list).
long=$(printf 'x%.0s' $(seq 5000))
cases+=$'\n'"-XX:HABLibrary=/$long"$'\t'"fail"$'\t'"UseHAB: cannot load"
cases+=$'\n'"-XX:HABLevels=core:1M,$long"$'\t'"fail"$'\t'"UseHAB: -XX:HABLevels=core:1M,xx"
cases+=$'\n'"-XX:HABCpuId=$long"$'\t'"fail"$'\t'"cpu_id must be one of"

# The environments' runs (--environments): prints a Markdown table; exit 1 if any failed.
environments() {
  local jar="$repo/bench/jvm/target/benchmarks.jar" wrapper="$work/without-rseq"
  if [ ! -s "$jar" ]; then
    (cd "$repo/bench/jvm" && mvn -q -B package -DskipTests) || { echo "cannot build $jar" >&2; exit 1; }
  fi
  cc -O2 -Wall -Wextra -Werror -o "$wrapper" "$repo/tools/without-rseq.c" || exit 1
  local program=(-Xmx128m -Xmn4m -cp "$jar" hab.bench.Warehouses 16 40000)
  local verify=(-XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC)
  local failures=0
  echo "| environment | collector | flags | tier | exit | checksum | what the JVM said |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for gc in -XX:+UseParallelGC -XX:+UseG1GC; do
    local stock
    stock=$("$java" -XX:+UnlockExperimentalVMOptions "$gc" "${program[@]}" 2>&1 | grep -o 'checksum 0x[0-9a-f]*' | sort -u | tr '\n' ' ')
    for environment in ${ENVIRONMENTS:-glibc own enosys eperm}; do
      local wrap=() expect
      case "$environment" in
        glibc) expect="rseq areas: glibc's registration" ;;
        own) wrap=(env GLIBC_TUNABLES=glibc.pthread.rseq=0); expect="rseq areas: Hab's own registration per thread (offset" ;;
        enosys) wrap=("$wrapper" enosys); expect="Function not implemented" ;;
        eperm) wrap=("$wrapper" eperm); expect="Operation not permitted" ;;
        *) echo "unknown environment $environment (glibc own enosys eperm)" >&2; exit 1 ;;
      esac
      for hab in -XX:+UseHAB -XX:+UseHABCPULABs "-XX:+UseHABCPULABs -XX:-HABFlip"; do
        for tier in ${TIERS:-default c2 c1 interpreter}; do
          local tier_flags=()
          case "$tier" in
            default) ;;
            c2) tier_flags=(-XX:-TieredCompilation) ;;
            c1) tier_flags=(-XX:TieredStopAtLevel=1) ;;
            interpreter) tier_flags=(-Xint) ;;
          esac
          rm -f "$work"/hs_err*
          local output status problem="" sum
          local hab_flags
          read -r -a hab_flags <<<"$hab"
          output=$(cd "$work" && "${wrap[@]}" "$java" -XX:+UnlockExperimentalVMOptions "$gc" "${hab_flags[@]}" "${tier_flags[@]}" "${verify[@]}" \
            -Xlog:gc+init "${program[@]}" 2>&1)
          status=$?
          sum=$(grep -o 'checksum 0x[0-9a-f]*' <<<"$output" | sort -u | tr '\n' ' ')
          if [ "$status" != 0 ] || ls "$work"/hs_err* >/dev/null 2>&1; then
            problem="failed"
          elif [ "$sum" != "$stock" ]; then
            problem="not stock's $stock"
          elif ! grep -qF -- "$expect" <<<"$output"; then
            problem="no \"$expect\" in its output"
          elif [ "$hab" != -XX:+UseHAB ] && [ "${environment#e}" = "$environment" ] \
               && ! grep -qF "objects in per-CPU LABs" <<<"$output"; then
            problem="no per-CPU LABs"
          fi
          local said
          said=$(grep -E "per-CPU support|UseHAB" <<<"$output" | head -1 | sed 's/^\[[^]]*\]\[[^]]*\]\[[^]]*\] *//; s/|/\\|/g')
          echo "| $environment | ${gc#-XX:+Use} | \`$hab\` | $tier | $status | ${sum//checksum /} | ${said}${problem:+ — **$problem**} |"
          [ -n "$problem" ] && failures=$((failures + 1))
        done
      done
    done
  done
  # Native threads that attach mid-flight (jvm/hotspot/test/attach.c) allocate in per-CPU LABs
  # through the runtime's inline bump, every heap verified: the arrays' contents must sum right.
  local jdk_dir attach="$work/attach"
  jdk_dir="$(dirname "$(dirname "$java")")"
  cc -O2 -Wall -Wextra -Werror -I"$jdk_dir/include" -I"$jdk_dir/include/linux" \
    "$here/test/attach.c" -L"$jdk_dir/lib/server" -ljvm -Wl,-rpath,"$jdk_dir/lib/server" \
    -lpthread -o "$attach" || exit 1
  for gc in -XX:+UseParallelGC -XX:+UseG1GC; do
    for environment in ${ENVIRONMENTS:-glibc own enosys eperm}; do
      local wrap=()
      case "$environment" in
        own) wrap=(env GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
        enosys | eperm) wrap=("$wrapper" "$environment") ;;
      esac
      local output status
      output=$(cd "$work" && "${wrap[@]}" "$attach" 8 4 20000 "$gc" -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip \
        -Xmx256m -Xmn8m "${verify[@]}" 2>&1)
      status=$?
      local result
      result=$(grep -o "attached threads: .*" <<<"$output")
      if [ "$status" != 0 ] || ! grep -q ": ok$" <<<"$result"; then
        echo "| $environment | ${gc#-XX:+Use} | attach.c, \`-XX:+UseHABCPULABs -XX:-HABFlip\` | - | $status | - | **${result:-failed}** |"
        failures=$((failures + 1))
      else
        echo "| $environment | ${gc#-XX:+Use} | attach.c, \`-XX:+UseHABCPULABs -XX:-HABFlip\` | - | $status | - | $result |"
      fi
    done
  done
  # An explicit -XX:HABCpuId=rseq the kernel cannot honour is the one refusal, with its reason.
  for error in enosys eperm; do
    local output status
    output=$("$wrapper" "$error" "$java" -XX:+UnlockExperimentalVMOptions -XX:+UseHAB -XX:HABCpuId=rseq -version 2>&1)
    status=$?
    if [ "$status" = 0 ] || ! grep -qF "refused Hab's own registration" <<<"$output"; then
      echo "| $error | Parallel | \`-XX:+UseHAB -XX:HABCpuId=rseq\` | - | $status | - | **not refused with its reason** |"
      failures=$((failures + 1))
    else
      echo "| $error | Parallel | \`-XX:+UseHAB -XX:HABCpuId=rseq\` | - | $status | - | refused: $(grep -o "HABCpuId=rseq: .*" <<<"$output" | head -1 | sed 's/|/\\|/g') |"
    fi
  done
  if [ "$failures" != 0 ]; then
    echo "$failures run(s) failed" >&2
    exit 1
  fi
  echo "every run as expected"
  exit 0
}
[ "${1:-}" = "--environments" ] && environments

failures=0
echo "| flag | expected | exit | what the JVM printed |"
echo "| --- | --- | --- | --- |"
while IFS=$'\t' read -r flag expected text; do
  rm -f "$work"/hs_err*
  read -r -a flags <<<"$flag"
  grep -qE -- '-XX:\+Use[A-Za-z0-9]+GC' <<<"$flag" || flags=(-XX:+UseParallelGC "${flags[@]}")
  output=$(cd "$work" && "$java" -XX:+UnlockExperimentalVMOptions -XX:+UseHAB -Xlog:gc+init "${flags[@]}" -version 2>&1)
  status=$?
  problem=""
  if [ "$status" -gt 128 ] || ls "$work"/hs_err* >/dev/null 2>&1 || grep -q "SIGSEGV\|fatal error" <<<"$output"; then
    problem="crashed"
  elif [ "$expected" = run ] && [ "$status" != 0 ]; then
    problem="did not start"
  elif [ "$expected" = fail ] && [ "$status" = 0 ]; then
    problem="started"
  elif ! grep -qF -- "$text" <<<"$output"; then
    problem="no \"$text\" in its output"
  fi
  said=$(grep -E "UseHAB|HABLevels|HAB:|Error" <<<"$output" | head -2 | sed 's/^\[[^]]*\]\[[^]]*\]\[[^]]*\] *//' | tr '\n' ' ' | sed 's/|/\\|/g; s/ *$//')
  # A long value is shown by its start and its length.
  shown=$flag
  [ "${#flag}" -gt 80 ] && shown="$(sed -E 's/(.)\1{19,}/\1\1…\1\1/g' <<<"$flag") (${#flag} characters)"
  said=$(sed -E 's/(.)\1{19,}/\1\1…\1\1/g' <<<"$said")
  echo "| \`$shown\` | $expected | $status | ${said:-(nothing)}${problem:+ — **$problem**} |"
  [ -n "$problem" ] && failures=$((failures + 1))
done <<<"$cases"
if [ "$failures" != 0 ]; then
  echo "$failures case(s) failed" >&2
  exit 1
fi
echo "every case as expected"
