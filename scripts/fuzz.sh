#!/usr/bin/env bash
# Runs the fuzz targets (test/Fuzz) for a given time each, niced, and
# reports the counts; a crash, an abort, a hang or a broken contract stops
# that target and leaves the input under $out as crash-*/timeout-*.
#
#   scripts/fuzz.sh [SECONDS] [ir|capi|capi-gpu ...]   default: 600 s, all
#
# ir: kpool-fuzz-ir (parser, verifier, pipelines); capi: kpool-fuzz-capi (the
# C runtime API); capi-gpu: kpool-fuzz-capi-gpu (the same on the GPU kernels,
# emulated on the CPU).
#
# Environment:
#   KPOOL_BUILD_DIR   build tree (default: build/); an ASan build
#                     (KPOOL_SANITIZE, docs/testing.md) fuzzes under ASan
#   FUZZ_SEED         first seed (default: the time); each target gets its own
#   FUZZ_OUT          where logs and artifacts go (default: $build/fuzz)
#   FUZZ_ENGINE       driver (default: the bounded driver linked into
#                     kpool-fuzz-*) or libfuzzer (kpool-libfuzzer-*, built
#                     with -DKPOOL_LIBFUZZER=ON)
# Replay a saved input: build/bin/kpool-fuzz-ir -runs=0 FILE
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ir capi capi-gpu)
seed="${FUZZ_SEED:-$(date +%s)}"
out="${FUZZ_OUT:-$build/fuzz}"
engine="${FUZZ_ENGINE:-driver}"
mkdir -p "$out"

prefix=kpool-fuzz
[ "$engine" = libfuzzer ] && prefix=kpool-libfuzzer
for t in "${targets[@]}"; do
  if [ "$engine" = libfuzzer ] && [ "$t" = capi-gpu ]; then
    echo "fuzz: capi-gpu has no libFuzzer build; use the driver" >&2; exit 2
  fi
done
ninja -C "$build" "${targets[@]/#/$prefix-}" >/dev/null

# The IR target's seeds: the kpool test files and examples, one file per
# `// -----` case (libFuzzer reads a directory of inputs).
seeds=("$root/examples" "$root/test/Dialect/KPool" "$root/test/Conversion"
       "$root/test/Pipelines" "$root/test/Fuzz/Inputs")
corpus="$out/ir-corpus"
if [ "$engine" = libfuzzer ]; then
  rm -rf "$corpus" && mkdir -p "$corpus"
  for f in $(find "${seeds[@]}" -name '*.mlir' | sort); do
    awk -v base="$corpus/$(basename "$f" .mlir)" '
      /^\/\/ -----/ { n++; next } /^[ \t]*\/\// { next }
      { print > (base "-" n ".mlir") }' "$f"
  done
fi

status=0
for t in "${targets[@]}"; do
  seed=$((seed + 1))
  log="$out/$t-$seed.log"
  args=(-seed="$seed" -max_total_time="$seconds" -timeout=120
        -artifact_prefix="$out/$t-")
  case "$t" in
    ir) if [ "$engine" = libfuzzer ]; then inputs=("$corpus")
        else inputs=(-split_mlir=1 "${seeds[@]}"); fi
        args+=(-max_len=65536) ;;
    capi|capi-gpu) inputs=(); args+=(-max_len=1024) ;;
    *) echo "fuzz: unknown target $t (ir, capi, capi-gpu)" >&2; exit 2 ;;
  esac
  echo "fuzz: $t for $seconds s (seed $seed, log $log)"
  # In a sanitized tree libFuzzer's own C++ runtime is loaded before the
  # shared ASan runtime, which must come first: preload it.
  preload=$(ldd "$build/bin/$prefix-$t" | awk '/libclang_rt\.asan/ { print $3 }')
  start=$(date +%s)
  if env ${preload:+LD_PRELOAD=$preload} nice -n 19 "$build/bin/$prefix-$t" \
       "${args[@]}" "${inputs[@]}" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (exit $?; see $log and $out/$t-*)"
    status=1
  fi
  grep -E '^==fuzz(-ir|-capi)?== (done|[0-9]+ inputs|[a-z_]+ +[0-9]+ calls)|^#[0-9]+.*DONE|^Done [0-9]+ runs' \
    "$log" | sed 's/^/  /' || true
  echo "fuzz: $t: $result after $(( $(date +%s) - start )) s"
done
exit $status
