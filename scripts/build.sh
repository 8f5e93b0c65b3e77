#!/usr/bin/env bash
# Configures (once) and builds kpool into ${KPOOL_BUILD_DIR:-build}.
# KPOOL_SANITIZE=address,undefined (at the first configure of a build tree)
# builds kpool's code with those sanitizers; see docs/testing.md:
#   KPOOL_BUILD_DIR=build-asan KPOOL_SANITIZE=address,undefined \
#     scripts/build.sh check-kpool-sanitize
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"

# ccache, when installed, shares compiled objects between build trees
# (paths under the checkout are hashed relative to it); KPOOL_CCACHE=0
# turns it off.
launcher=()
if [ "${KPOOL_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$root"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DCMAKE_INSTALL_PREFIX="$build/install" \
    -DKPOOL_SANITIZE="${KPOOL_SANITIZE:-}"
fi
ninja -C "$build" "$@"
