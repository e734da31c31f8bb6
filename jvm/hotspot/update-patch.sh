#!/usr/bin/env bash
# Writes jvm/hotspot/hab.patch again from the edited source tree that build.sh unpacked:
# every file the patch touches now, plus any given as arguments (paths from the source root,
# e.g. src/hotspot/share/gc/shared/gcConfig.cpp), diffed against the source package's own.
#
#   jvm/hotspot/update-patch.sh [FILE...]    # then jvm/hotspot/build.sh to rebuild
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
source_dir="$work/jdk17u"
tarball="$(ls "$work"/download/openjdk-17_*.orig.tar.xz)"
files=$( (grep '^+++ ' "$here/hab.patch" | awk '{print $2}' | sed 's|^b/||'; printf '%s\n' "$@") | sort -u)
pristine="$(mktemp -d)"
trap 'rm -rf "$pristine"' EXIT
members=$(for f in $files; do echo "*/$f"; done)
# shellcheck disable=SC2086
tar -xJf "$tarball" -C "$pristine" --strip-components=1 --wildcards $members
for f in $files; do
  diff -u --label "a/$f" --label "b/$f" "$pristine/$f" "$source_dir/$f" || true
done >"$here/hab.patch.new"
mv "$here/hab.patch.new" "$here/hab.patch"
# The tree now carries this patch.
cp "$here/hab.patch" "$work/applied.patch"
grep -c '^@@' "$here/hab.patch" | xargs echo "hunks:"
