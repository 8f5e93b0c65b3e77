#!/usr/bin/env bash
# The emulated GPU profile (no GPU needed; EMULATED figures: the shipped PTX
# executed by the emulated CUDA driver of test/lib/CudaEmu, a model of the
# memory system, not a measurement): kpool-profile-gpu runs the production
# compress, the fused step without and with the pool cache (paged FP8,
# Hadamard, absmax) on a prefill batch and a decode batch, and the
# hand-written CUDA compress (benchmarks/cuda/handwritten-compress.cu,
# nvcc -ptx -arch=sm_90) on the same prefill inputs, through the emulated
# driver with KPOOL_EMU_PROFILE; benchmarks/emulated-profile.py prints, per
# run, thread-instructions per pool by class, active lanes per warp
# instruction, sector and line bytes per useful byte, next to the static
# report (ptxas -v, utils/ptx-report.py) of the same PTX as it was loaded
# (KPOOL_PTX_DUMP), and the executor's speed.
#
#   benchmarks/gpu-emulated-profile.sh [build-dir] [--quick] [--prefill=T]
#                                      [--requests=R] [--decode=B]
#
# --quick: 256 prefill tokens, a decode batch of 32, no ptxas (what the lit
# test runs). Default: 4096 prefill tokens in 4 requests, a decode batch of
# 256.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
quick=0
sizes=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --prefill=* | --requests=* | --decode=*) sizes+=("$arg") ;;
    -*) echo "usage: $0 [build-dir] [--quick] [--prefill=T] [--requests=R] [--decode=B]" >&2
        exit 2 ;;
    *) build="$arg" ;;
  esac
done
if [ "$quick" = 1 ]; then
  sizes=(--prefill=256 --requests=2 --decode=32 "${sizes[@]}")
fi
program="$build/bin/kpool-profile-gpu"
driver="$build/lib/cuda-emu"
if [ ! -x "$program" ] || [ ! -e "$driver/libcuda.so.1" ]; then
  echo "$0: needs $program and the emulated CUDA driver $driver/libcuda.so.1" \
       "(a build with the CUDA toolkit)" >&2
  exit 1
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

args=("${sizes[@]}")
if [ -x "$cuda/bin/nvcc" ]; then
  "$cuda/bin/nvcc" -ptx -arch=sm_90 -O3 \
    "$root/benchmarks/cuda/handwritten-compress.cu" -o "$out/handwritten.ptx"
  args+=(--handwritten="$out/handwritten.ptx")
else
  echo "(no nvcc under $cuda: no hand-written CUDA compress in this profile)"
fi

run() {
  env LD_LIBRARY_PATH="$driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    KPOOL_EMU_ORDER=forward KPOOL_EMU_SEED=0 KPOOL_EMU_APPROX=nominal \
    KPOOL_EMU_ON_FINDING=exit "$@" "$program" "${args[@]}"
}
echo "command: kpool-profile-gpu ${args[*]//$out\//} (through the emulated driver)"
run KPOOL_EMU_CHECKS=all KPOOL_EMU_PROFILE="$out/profile.jsonl" \
  KPOOL_PTX_DUMP="$out/ptx" > "$out/runs.txt"
head -1 "$out/runs.txt"
run KPOOL_EMU_CHECKS=none KPOOL_EMU_PROFILE="$out/unchecked.jsonl" \
  > "$out/runs-unchecked.txt"

static=()
report=(--no-ptxas)
if [ "$quick" = 0 ] && [ -x "$cuda/bin/ptxas" ]; then
  report=(--ptxas "$cuda/bin/ptxas")
fi
if python3 "$root/utils/ptx-report.py" "$out"/ptx/*.ptx "${report[@]}" \
     --json > "$out/static.json"; then
  static=(--static "$out/static.json")
else
  echo "(the static report failed; see above)"
fi
echo
python3 "$root/benchmarks/emulated-profile.py" --runs "$out/runs.txt" \
  --profile "$out/profile.jsonl" --unchecked "$out/unchecked.jsonl" \
  "${static[@]}"
