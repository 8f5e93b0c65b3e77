#!/usr/bin/env bash
# Set-up, build and every test: the lit suite (dialect, conversions,
# pipelines, PTX assembled by ptxas, CPU execution, differential tests
# against the reference, the installed-package consumer, Python).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/scripts/build.sh" check-kpool
# The developer's loop keeps working (docs/testing.md): a per-directory
# target, and lit on one test by its source path.
"$root/scripts/build.sh" check-kpool-dialect
KPOOL_BUILD_DIR="$build" "${LIT:-/usr/lib/llvm-22/bin/lit}" -sv \
  "$root/test/Dialect/KPool/invalid.mlir"
