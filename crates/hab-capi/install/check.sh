#!/usr/bin/env bash
# Builds smoke.c against the libhab installed under PREFIX (make install PREFIX=...) with
# pkg-config, and with CMake's find_package(Hab) against both libraries, and runs each.
set -euo pipefail
prefix=$(cd "${1:?usage: check.sh PREFIX}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== pkg-config: $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs hab)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -pedantic -O2 "$here/smoke.c" -o "$work/smoke_pkg_config" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs hab)
LD_LIBRARY_PATH="$prefix/lib" "$work/smoke_pkg_config"
# ldd's output is read whole before it is searched: `ldd | grep -q` under pipefail fails
# whenever grep exits before ldd has finished writing (SIGPIPE).
libraries=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$work/smoke_pkg_config")
case "$libraries" in
  *"libhab.so.1 => $prefix/lib/libhab.so.1 "*)
    echo "linked against $prefix/lib/libhab.so.1" ;;
  *)
    echo "not linked against the installed $prefix/lib/libhab.so.1; ldd says:" >&2
    echo "$libraries" >&2
    exit 1 ;;
esac

if command -v cmake >/dev/null 2>&1; then
  echo "== CMake: find_package(Hab), Hab::hab and Hab::hab_static"
  cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
  cmake --build "$work/cmake" >/dev/null
  "$work/cmake/smoke_shared"
  "$work/cmake/smoke_static"
else
  echo "no cmake here: the CMake package is not checked"
fi
echo "the installed libhab works"
