#!/usr/bin/env bash
# A long run of the C runtime API's random driver (test/CAPI/kpool-capi-fuzz.c;
# the lit suite runs 2 x 3,000 calls). Usage:
#   benchmarks/fuzz-capi.sh [build dir] [calls per seed] [seeds...]
# Prints one summary line per seed; exits non-zero on a canary hit, an
# output changed by a failed call, or a crash.
set -euo pipefail
build="${1:-build}"
calls="${2:-1000000}"
shift $(( $# > 2 ? 2 : $# ))
seeds=("${@:-1 2 3}")
for seed in ${seeds[@]}; do
  echo -n "seed $seed: "
  "$build/bin/kpool-capi-fuzz-test" "$calls" "$seed"
done
