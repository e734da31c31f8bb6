#!/usr/bin/env bash
# Writes jvm/hotspot/jdk<N>/hab.patch again from the edited source tree that build.sh unpacked:
# every file the patch touches now, plus any given as arguments (paths from the source root,
# e.g. src/hotspot/share/gc/shared/gcConfig.cpp), diffed against the source's own.
#
#   jvm/hotspot/update-patch.sh [--jdk 17] [FILE...]    # then jvm/hotspot/build.sh to rebuild
#
# The new files are jvm/hotspot/jdk<N>/src's, which build.sh copies into the tree: edit them
# there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
jdk_version=25
if [ "${1:-}" = "--jdk" ]; then
  jdk_version="${2:?--jdk takes 17 or 25}"
  shift 2
fi
changes="$here/jdk$jdk_version"
pristine="$(mktemp -d)"
trap 'rm -rf "$pristine"' EXIT
files=$( (grep '^+++ ' "$changes/hab.patch" | awk '{print $2}' | sed 's|^b/||'; printf '%s\n' "$@") | sort -u)
case "$jdk_version" in
  25)
    source_dir="$work/jdk25u"
    archive="${HAB_JDK25_ARCHIVE:-$repo/../shared/jdk25/openjdk-25.0.3-src.tar.xz}"
    # shellcheck disable=SC2086
    tar -xJf "$archive" -C "$pristine" $files
    ;;
  17)
    source_dir="$work/jdk17u"
    tarball="$(ls "$work"/download/openjdk-17_*.orig.tar.xz)"
    members=$(for f in $files; do echo "*/$f"; done)
    # shellcheck disable=SC2086
    tar -xJf "$tarball" -C "$pristine" --strip-components=1 --wildcards $members
    ;;
  *) echo "--jdk $jdk_version: Hab's changes exist for JDK 17 and 25" >&2; exit 2 ;;
esac
for f in $files; do
  diff -u --label "a/$f" --label "b/$f" "$pristine/$f" "$source_dir/$f" || true
done >"$changes/hab.patch.new"
mv "$changes/hab.patch.new" "$changes/hab.patch"
# The tree now carries this patch.
cp "$changes/hab.patch" "$work/applied-$jdk_version.patch"
grep -c '^@@' "$changes/hab.patch" | xargs echo "hunks:"
