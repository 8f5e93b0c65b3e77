#!/usr/bin/env bash
# Set-up (with what the tests use: setup.sh --tests), build and every test:
# the lit suite (dialect, conversions, pipelines, PTX assembled by ptxas, CPU
# execution, differential tests against the reference, the installed-package
# consumer, the wheel, Python and PyTorch).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" --tests
"$root/scripts/build.sh"
"$root/scripts/build.sh" check-kpool
# The developer's loop keeps working (docs/testing.md): a per-directory
# target, and lit on one test by its source path.
"$root/scripts/build.sh" check-kpool-dialect
KPOOL_BUILD_DIR="$build" "${LIT:-/usr/lib/llvm-22/bin/lit}" -sv \
  "$root/test/Dialect/KPool/invalid.mlir"
