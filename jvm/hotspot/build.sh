#!/usr/bin/env bash
# Builds HotSpot (OpenJDK 17, Debian's source) with Hab's hierarchical allocation buffers and
# puts it into a copy of the JDK of exactly that version:
#
#   jvm/hotspot/build.sh            # then: target/hotspot-hab/jdk/bin/java -XX:+UseHAB ...
#   jvm/hotspot/build.sh --check    # only check that Hab's changes apply to the source
#                                     (exit 3: the source could not be fetched)
#
# Steps (each skipped when its result is there, so a second run rebuilds only what changed):
# build dependencies from Debian; a deb-src entry for the suite; the source package and the
# binary JDK packages of one version; the source unpacked; Hab's changes applied (the patch
# and the new files of jvm/hotspot/src); configure; `make hotspot`; libhab built; the JDK
# copied with the new libjvm.so and libhab.so.1. Log: target/hotspot-hab/build.log.
# Needs root (apt) unless the dependencies are installed. Environment:
#   HAB_OPENJDK_VERSION  the Debian version (default: the suite's source version)
#   HAB_HOTSPOT_DIR      the work directory (default: target/hotspot-hab)
#   JOBS                 make's jobs (default: the CPUs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
mkdir -p "$work"
check_only=0
[ "${1:-}" = "--check" ] && check_only=1
log="$work/build.log"
[ "$check_only" = 1 ] && log="$work/check.log"

step() { printf '== %s [%s]\n' "$*" "$(date +%T)" | tee -a "$log"; }
run() { "$@" >>"$log" 2>&1 || { echo "failed: $* (see $log)" >&2; tail -30 "$log" >&2; exit 1; }; }
# A download: in --check mode a failure exits 3, so that CI can tell it from a patch that
# no longer applies.
fetch() {
  "$@" >>"$log" 2>&1 && return 0
  echo "failed: $* (see $log)" >&2
  tail -10 "$log" >&2
  if [ "$check_only" = 1 ]; then exit 3; else exit 1; fi
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
started=$(date +%s)
: >"$log"

step "source entries for $suite"
sources=/etc/apt/sources.list.d/hab-deb-src.sources
if ! apt-cache showsrc openjdk-17 2>/dev/null | grep '^Version:' >/dev/null; then # grep reads all: no SIGPIPE under pipefail
  as_root tee "$sources" >/dev/null <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  fetch as_root apt-get update -q
fi
version="${HAB_OPENJDK_VERSION:-$(apt-cache showsrc openjdk-17 | awk '/^Version:/ {print $2}' | sort -V | tail -1)}"
if [ -z "$version" ]; then
  echo "no openjdk-17 source package in $suite" >&2
  if [ "$check_only" = 1 ]; then exit 3; else exit 1; fi
fi
upstream="${version%%-*}" # 17.0.19+10
echo "OpenJDK $version" | tee -a "$log"

step "the source package openjdk-17=$version"
download="$work/download"
mkdir -p "$download"
tarball="$download/openjdk-17_${upstream}.orig.tar.xz"
if [ ! -s "$tarball" ]; then
  (cd "$download" && fetch apt-get source --download-only "openjdk-17=$version")
fi
source_dir="$work/jdk17u"

if [ "$check_only" = 1 ]; then
  step "checking that Hab's changes apply"
  check="$work/check"
  rm -rf "$check" && mkdir -p "$check"
  files=$(grep '^+++ ' "$here/hab.patch" | awk '{print $2}' | sed 's|^b/||')
  # The patched files, and whatever lies in the directories of the new files (to see that they
  # exist), in one pass over the archive.
  # A directory inside another one listed is left out: tar credits each member to the first
  # pattern it matches (a wildcard matches '/' too), and would find nothing for the inner one.
  new_dirs=$(cd "$here/src" && find . -type f -exec dirname {} \; | sed 's|^\./||' | sort -u |
    awk '{ for (d in kept) if (index($0, d "/") == 1) next; kept[$0] = 1; print }')
  members=$(for f in $files; do echo "*/$f"; done; for d in $new_dirs; do echo "*/src/$d/*"; done)
  # shellcheck disable=SC2086
  tar -xJf "$tarball" -C "$check" --strip-components=1 --wildcards $members
  (cd "$check" && patch -p1 --dry-run --fuzz=0 <"$here/hab.patch") | tee -a "$log"
  for new in $(cd "$here/src" && find . -type f); do
    test -d "$check/src/$(dirname "$new")" || { echo "no directory for $new in the source" >&2; exit 1; }
  done
  echo "Hab's changes apply to OpenJDK $version"
  exit 0
fi

step "build dependencies"
needed="autoconf file zip unzip make gcc g++ libcups2-dev libfontconfig-dev libfreetype-dev
  libasound2-dev libx11-dev libxext-dev libxrender-dev libxrandr-dev libxtst-dev libxt-dev"
missing=$(for p in $needed; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  run as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

step "the JDK packages openjdk-17-{jre,jdk}-headless=$version"
for package in openjdk-17-jre-headless openjdk-17-jdk-headless; do
  if ! ls "$download/${package}_"*.deb >/dev/null 2>&1; then
    (cd "$download" && fetch apt-get download "$package=$version")
  fi
done

step "unpacking the source"
if [ ! -f "$source_dir/configure" ]; then
  rm -rf "$source_dir" && mkdir -p "$source_dir"
  run tar -xJf "$tarball" -C "$source_dir" --strip-components=1
fi

step "configure"
build_dir="$source_dir/build/linux-x86_64-server-release"
boot_jdk="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
if [ ! -f "$build_dir/spec.gmk" ]; then
  (cd "$source_dir" && run bash configure --enable-headless-only --with-jvm-variants=server \
    --with-boot-jdk="$boot_jdk" --disable-warnings-as-errors --with-debug-level=release \
    --with-jvm-features=-shenandoahgc,-zgc,-jvmci \
    --with-version-opt=hab --with-native-debug-symbols=none)
fi

step "applying Hab's changes"
# The patch last applied is kept beside the tree: a changed patch is reversed, then the new
# one applied; new files are copied only when they differ, so make rebuilds what changed.
applied="$work/applied.patch"
if ! cmp -s "$applied" "$here/hab.patch"; then
  if [ -f "$applied" ]; then
    (cd "$source_dir" && run patch -p1 -R --fuzz=0 <"$applied")
    rm -f "$applied"
  fi
  (cd "$source_dir" && run patch -p1 --fuzz=0 <"$here/hab.patch")
  cp "$here/hab.patch" "$applied"
fi
# jvm/hotspot/src mirrors the source's src/; hab.h comes from libhab's own include/. The
# files copied are listed beside the tree, so that one no longer in jvm/hotspot/src (moved or
# gone) is removed from it; the first list names the files of the Parallel-only layout.
copy_if_changed() { cmp -s "$1" "$2" || cp "$1" "$2"; }
copied="$work/copied.list"
[ -f "$copied" ] || printf '%s\n' hotspot/share/gc/parallel/psHab.cpp \
  hotspot/share/gc/parallel/psHab.hpp hotspot/share/gc/parallel/hab.h >"$copied"
now="$( (cd "$here/src" && find . -type f | sed 's|^\./||'); echo hotspot/share/gc/shared/hab.h)"
{ grep -vxF -f <(echo "$now") "$copied" || true; } | while read -r gone; do rm -f "$source_dir/src/$gone"; done
echo "$now" >"$copied"
(cd "$here/src" && find . -type f) | while read -r new; do
  copy_if_changed "$here/src/$new" "$source_dir/src/$new"
done
copy_if_changed "$repo/crates/hab-capi/include/hab.h" "$source_dir/src/hotspot/share/gc/shared/hab.h"

step "make hotspot (JOBS=${JOBS:-$(nproc)})"
make_started=$(date +%s)
(cd "$source_dir" && run make hotspot JOBS="${JOBS:-$(nproc)}")
echo "make hotspot: $(( $(date +%s) - make_started )) s" | tee -a "$log"
libjvm="$build_dir/support/modules_libs/java.base/server/libjvm.so"

step "libhab (release)"
(cd "$repo" && run cargo build --release -p hab-capi)

step "the JDK with Hab's libjvm.so"
jdk="$work/jdk"
unpacked="$work/jdk-packages"
if [ ! -x "$jdk/bin/java" ]; then
  rm -rf "$unpacked" "$jdk" && mkdir -p "$unpacked"
  for deb in "$download"/openjdk-17-j*-headless_*.deb; do run dpkg -x "$deb" "$unpacked"; done
  cp -a "$unpacked/usr/lib/jvm/java-17-openjdk-amd64" "$jdk"
  # Some of conf/ are links into /etc: take the package's own files instead (cacerts comes
  # from another package: the system's copy where there is one, else the link stays).
  find "$jdk" -type l | while read -r link; do
    target="$(readlink "$link")"
    case "$target" in
      /etc/*)
        if [ -e "$unpacked$target" ]; then rm "$link"; cp -aL "$unpacked$target" "$link"
        elif [ -e "$target" ]; then rm "$link"; cp -aL "$target" "$link"
        fi ;;
    esac
  done
  rm -f "$jdk"/lib/server/classes*.jsa # made for the stock libjvm.so
fi
install -m 0755 "$libjvm" "$jdk/lib/server/libjvm.so"
install -m 0755 "$repo/target/release/libhab_capi.so" "$jdk/lib/server/libhab.so.1"

step "smoke test"
run "$jdk/bin/java" -XX:+UseParallelGC -XX:+UseHAB -Xlog:gc+tlab=debug -version
run "$jdk/bin/java" -XX:+UseG1GC -XX:+UseHAB -Xlog:gc+tlab=debug -version
"$jdk/bin/java" -XX:+UseHAB -Xlog:gc+init -version 2>&1 | grep -i "hab\|version" | tee -a "$log"
step "the HAB flags under bad values (jvm/hotspot/flags.sh)"
JDK="$jdk" run "$here/flags.sh"
echo "built in $(( $(date +%s) - started )) s: $jdk/bin/java -XX:+UseHAB" | tee -a "$log"
