#!/usr/bin/env bash
# Set-up, build and the main job: lower a realistic kpool program (a serving
# step over a ragged batch) to PTX for sm_90 and assemble it, then run
# chunked prefill followed by decode through the kernels -- on the GPU when
# one is present, on the CPU otherwise -- and check every pool against the
# reference.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/scripts/demo.sh"
