#!/usr/bin/env bash
# Builds HotSpot with Hab's hierarchical allocation buffers and lays the new libjvm.so over a
# copy of the JDK of exactly that release:
#
#   jvm/hotspot/build.sh                  # JDK 25: target/hotspot-hab/jdk/bin/java -XX:+UseHAB ...
#   jvm/hotspot/build.sh --jdk 17         # JDK 17: target/hotspot-hab/jdk17/bin/java ...
#   jvm/hotspot/build.sh --source DIR     # JDK 25 from an upstream jdk25u checkout (tag jdk-25.0.3+9)
#   jvm/hotspot/build.sh --check [--jdk 17]  # only check that Hab's changes apply to the source
#                                           (exit 3: the source could not be fetched)
#
# JDK 25 (the default): the source is the OpenJDK 25.0.3 archive in ../shared/jdk25/ beside the
# repository (HAB_JDK25_ARCHIVE names another), or the checkout --source names; the boot JDK
# and the class libraries are Temurin 25.0.3 (HAB_JDK25_HOME, default
# /usr/lib/jvm/temurin-25-jdk-amd64); the changes are jvm/hotspot/jdk25/. The JDK's default CDS
# archives are dumped again for the new libjvm.so, so that start-up is stock's.
# JDK 17: Debian's openjdk-17 source package and the binary JDK packages of the same version
# (HAB_OPENJDK_VERSION to choose another); the changes are jvm/hotspot/jdk17/.
#
# Steps (each skipped when its result is there, so a second run rebuilds only what changed):
# build dependencies from Debian; the source unpacked; configure; Hab's changes applied (the
# patch and the new files of jvm/hotspot/jdk<N>/src); `make hotspot`; libhab built; the JDK
# copied with the new libjvm.so and libhab.so.1. Log: target/hotspot-hab/build-<N>.log.
# Needs root (apt) unless the dependencies are installed. Environment:
#   HAB_HOTSPOT_DIR      the work directory (default: target/hotspot-hab)
#   JOBS                 make's jobs (default: the CPUs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
check_only=0
jdk_version=25
checkout=""
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1 ;;
    --jdk) jdk_version="${2:?--jdk takes 17 or 25}"; shift ;;
    --source) checkout="$(cd "${2:?--source takes a directory}" && pwd)"; shift ;;
    *) echo "unknown argument $1 (--check, --jdk 17|25, --source DIR)" >&2; exit 2 ;;
  esac
  shift
done
case "$jdk_version" in
  17 | 25) ;;
  *) echo "--jdk $jdk_version: Hab's changes exist for JDK 17 and 25" >&2; exit 2 ;;
esac
[ -n "$checkout" ] && [ "$jdk_version" != 25 ] && { echo "--source is for JDK 25" >&2; exit 2; }
changes="$here/jdk$jdk_version"
mkdir -p "$work"
log="$work/build-$jdk_version.log"
[ "$check_only" = 1 ] && log="$work/check-$jdk_version.log"

step() { printf '== %s [%s]\n' "$*" "$(date +%T)" | tee -a "$log"; }
run() { "$@" >>"$log" 2>&1 || { echo "failed: $* (see $log)" >&2; tail -30 "$log" >&2; exit 1; }; }
# A missing source: in --check mode exit 3, so that CI can tell it from a patch that no
# longer applies.
no_source() {
  echo "$*" >&2
  if [ "$check_only" = 1 ]; then exit 3; else exit 1; fi
}
fetch() {
  "$@" >>"$log" 2>&1 && return 0
  tail -10 "$log" >&2
  no_source "failed: $* (see $log)"
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
started=$(date +%s)
: >"$log"

# Where each release comes from: sets source_dir, jdk (the JDK made), boot_jdk, features, and
# the functions unpack_members DEST PATH... (those source files, for --check), unpack_all DEST
# and list_all (every source path, from the source's root).
if [ "$jdk_version" = 25 ]; then
  source_dir="$work/jdk25u"
  jdk="$work/jdk"
  class_libraries="${HAB_JDK25_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
  boot_jdk="$class_libraries"
  features=""
  archive="${HAB_JDK25_ARCHIVE:-$repo/../shared/jdk25/openjdk-25.0.3-src.tar.xz}"
  if [ -n "$checkout" ]; then
    [ -f "$checkout/make/conf/version-numbers.conf" ] || no_source "$checkout is not a JDK source tree"
    grep -q '^DEFAULT_VERSION_FEATURE=25$' "$checkout/make/conf/version-numbers.conf" &&
      grep -q '^DEFAULT_VERSION_UPDATE=3$' "$checkout/make/conf/version-numbers.conf" ||
      no_source "$checkout is not JDK 25.0.3 (check out jdk25u's tag jdk-25.0.3+9)"
    unpack_members() { local dest="$1"; shift; (cd "$checkout" && cp --parents "$@" "$dest"); }
    unpack_all() { (cd "$checkout" && tar --exclude=.git --exclude=build -cf - .) | tar -xf - -C "$1"; }
    list_all() { (cd "$checkout" && find src -type f); }
    echo "OpenJDK 25.0.3 from $checkout" | tee -a "$log"
  else
    [ -s "$archive" ] || no_source "no OpenJDK 25 source at $archive (HAB_JDK25_ARCHIVE, or --source DIR)"
    # The archive has no top folder: its members are the paths themselves.
    unpack_members() { local dest="$1"; shift; tar -xJf "$archive" -C "$dest" "$@"; }
    unpack_all() { tar -xJf "$archive" -C "$1"; }
    list_all() { tar -tJf "$archive"; }
    echo "OpenJDK 25.0.3 from $archive" | tee -a "$log"
  fi
else
  suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
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
  [ -n "$version" ] || no_source "no openjdk-17 source package in $suite"
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
  jdk="$work/jdk17"
  boot_jdk="/usr/lib/jvm/java-17-openjdk-amd64"
  features="--with-jvm-features=-shenandoahgc,-zgc,-jvmci"
  # The Debian tarball has one top folder.
  unpack_members() {
    local dest="$1"; shift
    # shellcheck disable=SC2046
    tar -xJf "$tarball" -C "$dest" --strip-components=1 --wildcards $(printf '*/%s\n' "$@")
  }
  unpack_all() { tar -xJf "$tarball" -C "$1" --strip-components=1; }
  list_all() { tar -tJf "$tarball" | sed 's|^[^/]*/||'; }
fi

if [ "$check_only" = 1 ]; then
  step "checking that Hab's changes apply to JDK $jdk_version"
  check="$work/check-$jdk_version"
  rm -rf "$check" && mkdir -p "$check"
  files=$(grep '^+++ ' "$changes/hab.patch" | awk '{print $2}' | sed 's|^b/||')
  # shellcheck disable=SC2086
  unpack_members "$check" $files
  (cd "$check" && patch -p1 --dry-run --fuzz=0 <"$changes/hab.patch") | tee -a "$log"
  # Each new file's directory exists in the source (a moved directory would leave it out).
  listing="$check.list"
  list_all >"$listing"
  for new in $(cd "$changes/src" && find . -type f | sed 's|^\./||'); do
    dir="src/$(dirname "$new")/"
    grep -qF -- "$dir" "$listing" || { echo "no directory $dir for $new in the source" >&2; exit 1; }
  done
  echo "Hab's changes apply to OpenJDK $jdk_version's source"
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

if [ "$jdk_version" = 25 ]; then
  step "Temurin 25.0.3 (boot JDK and class libraries)"
  grep -q '^JAVA_VERSION="25.0.3"' "$class_libraries/release" 2>/dev/null ||
    { echo "$class_libraries is not a JDK 25.0.3 (HAB_JDK25_HOME names one)" >&2; exit 1; }
else
  step "the JDK packages openjdk-17-{jre,jdk}-headless=$version"
  for package in openjdk-17-jre-headless openjdk-17-jdk-headless; do
    if ! ls "$download/${package}_"*.deb >/dev/null 2>&1; then
      (cd "$download" && fetch apt-get download "$package=$version")
    fi
  done
fi

step "unpacking the source"
if [ ! -f "$source_dir/configure" ]; then
  rm -rf "$source_dir" && mkdir -p "$source_dir"
  unpack_all "$source_dir" >>"$log" 2>&1 || { echo "cannot unpack the source (see $log)" >&2; exit 1; }
fi

step "configure"
build_dir="$source_dir/build/linux-x86_64-server-release"
if [ ! -f "$build_dir/spec.gmk" ]; then
  # shellcheck disable=SC2086
  (cd "$source_dir" && run bash configure --enable-headless-only --with-jvm-variants=server \
    --with-boot-jdk="$boot_jdk" --disable-warnings-as-errors --with-debug-level=release \
    $features --with-version-opt=hab --with-native-debug-symbols=none)
fi

step "applying Hab's changes"
# The patch last applied is kept beside the tree: a changed patch is reversed, then the new
# one applied; new files are copied only when they differ, so make rebuilds what changed.
applied="$work/applied-$jdk_version.patch"
copied="$work/copied-$jdk_version.list"
if [ "$jdk_version" = 17 ] && [ -f "$work/applied.patch" ]; then
  # A tree from before JDK 25 was built here.
  mv "$work/applied.patch" "$applied"
  [ -f "$work/copied.list" ] && mv "$work/copied.list" "$copied"
fi
if ! cmp -s "$applied" "$changes/hab.patch"; then
  if [ -f "$applied" ]; then
    (cd "$source_dir" && run patch -p1 -R --fuzz=0 <"$applied")
    rm -f "$applied"
  fi
  (cd "$source_dir" && run patch -p1 --fuzz=0 <"$changes/hab.patch")
  cp "$changes/hab.patch" "$applied"
fi
# jdk<N>/src mirrors the source's src/; hab.h comes from libhab's own include/. The files
# copied are listed beside the tree, so that one no longer in jdk<N>/src (moved or gone) is
# removed from it; JDK 17's first list names the files of the Parallel-only layout.
copy_if_changed() { cmp -s "$1" "$2" || { mkdir -p "$(dirname "$2")" && cp "$1" "$2"; }; }
if [ ! -f "$copied" ] && [ "$jdk_version" = 17 ]; then
  printf '%s\n' hotspot/share/gc/parallel/psHab.cpp hotspot/share/gc/parallel/psHab.hpp \
    hotspot/share/gc/parallel/hab.h >"$copied"
fi
touch "$copied"
now="$( (cd "$changes/src" && find . -type f | sed 's|^\./||'); echo hotspot/share/gc/shared/hab.h)"
{ grep -vxF -f <(echo "$now") "$copied" || true; } | while read -r gone; do rm -f "$source_dir/src/$gone"; done
echo "$now" >"$copied"
(cd "$changes/src" && find . -type f | sed 's|^\./||') | while read -r new; do
  copy_if_changed "$changes/src/$new" "$source_dir/src/$new"
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
if [ "$jdk_version" = 25 ]; then
  # A JDK of another release here (JDK 17 was built into target/hotspot-hab/jdk before) is
  # replaced.
  if ! grep -q '^JAVA_VERSION="25.0.3"' "$jdk/release" 2>/dev/null; then
    rm -rf "$jdk"
    cp -a "$class_libraries" "$jdk"
  fi
else
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
  fi
fi
if ! cmp -s "$libjvm" "$jdk/lib/server/libjvm.so"; then
  install -m 0755 "$libjvm" "$jdk/lib/server/libjvm.so"
  rm -f "$jdk"/lib/server/classes*.jsa # made for another libjvm.so
fi
install -m 0755 "$repo/target/release/libhab_capi.so" "$jdk/lib/server/libhab.so.1"
if [ "$jdk_version" = 25 ] && [ ! -f "$jdk/lib/server/classes.jsa" ]; then
  step "CDS archives for the new libjvm.so"
  # The four Temurin ships: compressed oops or not, compact object headers or not.
  run "$jdk/bin/java" -Xshare:dump
  run "$jdk/bin/java" -XX:-UseCompressedOops -Xshare:dump
  run "$jdk/bin/java" -XX:+UseCompactObjectHeaders -Xshare:dump
  run "$jdk/bin/java" -XX:-UseCompressedOops -XX:+UseCompactObjectHeaders -Xshare:dump
fi

step "smoke test"
run "$jdk/bin/java" -XX:+UseParallelGC -XX:+UseHAB -Xlog:gc+tlab=debug -version
run "$jdk/bin/java" -XX:+UseG1GC -XX:+UseHAB -Xlog:gc+tlab=debug -version
"$jdk/bin/java" -XX:+UseHAB -Xlog:gc+init -version 2>&1 | grep -i "hab\|version" | tee -a "$log"
step "the HAB flags under bad values (jvm/hotspot/flags.sh)"
JDK="$jdk" run "$here/flags.sh"
echo "built in $(( $(date +%s) - started )) s: $jdk/bin/java -XX:+UseHAB" | tee -a "$log"
