#!/usr/bin/env bash
# Installs memgrad from a build directory into a temporary prefix and builds a program outside
# the project against it with pkg-config only (tests/install/consumer.cpp, plus a file including
# every installed header, so a header that includes one that is not installed fails here), then
# runs it.
#   tools/check_install.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --destdir "$stage" --no-rebuild >"$stage/install.log" 2>&1 ||
  { cat "$stage/install.log" >&2; exit 1; }
prefix="$stage$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
pcdir="$(dirname "$(find "$prefix" -name memgrad.pc | head -1)")"
flags="$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --cflags --libs memgrad)"
# Every installed header, as a consumer would include it (the include path is .../memgrad).
incdir="$(dirname "$(find "$prefix" -path '*/memgrad/engine/memgrad.h' | head -1)")/.."
(cd "$incdir" && find . -name '*.h' | sort | sed 's|^\./|#include "|; s|$|"|') >"$stage/all_headers.cpp"
echo "int all_headers_compile = $(grep -c include "$stage/all_headers.cpp");" >>"$stage/all_headers.cpp"
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 "$root/tests/install/consumer.cpp" "$stage/all_headers.cpp" $flags -o "$stage/consumer"
"$stage/consumer"
echo "install check: all $(grep -c include "$stage/all_headers.cpp") headers, libmemgrad.a and memgrad.pc from $(basename "$build") work for a program outside the project"
