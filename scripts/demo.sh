#!/usr/bin/env bash
# The main job, on an already built tree: lower a serving step to PTX for
# sm_90 and assemble it, then run chunked prefill + decode through the
# kernels and check every pool (GPU when present, CPU otherwise); then the
# same for the production pool cache (paged, Hadamard-rotated FP8): the
# step with its cache assembled for sm_90, and a serving schedule into the
# cache with every byte checked (on the GPU, or without one the shipped
# PTX through the emulated CUDA driver).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

# Lowers example $1.mlir to PTX for sm_90 ($out/$1.nvvm.mlir).
lower() {
  "$build/bin/kpool-opt" "$root/examples/$1.mlir" \
    -kpool-lower-to-nvvm="format=isa" -o "$out/$1.nvvm.mlir"
}

# Assembles each kernel of $out/$1.nvvm.mlir with ptxas (when the toolkit
# has it).
assemble() {
  if [ -x "$CUDA_HOME/bin/ptxas" ]; then
    python3 "$root/utils/extract-ptx.py" "$out/$1.nvvm.mlir" \
      --ptxas "$CUDA_HOME/bin/ptxas" --arch sm_90 --no-extern | sed 's/^/   /'
  else
    echo "   ptxas not found under $CUDA_HOME: skipped assembling"
  fi
}

have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# Runs GPU program $1 on the GPU when there is one, else through the
# emulated CUDA driver of test/lib/CudaEmu (the same binary and PTX,
# executed on the CPU), when this build has it with its PTX executor.
on_gpu_or_emulated() {
  if have_gpu && [ -x "$build/bin/$1" ]; then
    "$build/bin/$1"
  elif [ -x "$build/bin/$1" ] && [ -e "$build/lib/cuda-emu/libcuda.so.1" ] &&
      grep -q '^KPOOL_CUDA_EMU_EXECUTES:INTERNAL=ON' "$build/CMakeCache.txt"; then
    echo "   (no GPU here: the shipped PTX through the emulated CUDA driver)"
    LD_LIBRARY_PATH="$build/lib/cuda-emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$build/bin/$1"
  else
    echo "   (no GPU here, and no emulated CUDA driver with its PTX executor in"
    echo "    this build (it needs the CUDA toolkit): skipped)"
  fi
}

out="$build/demo"
mkdir -p "$out"
# Each phase says how long it took (wall clock, this machine).
phase_start=0
phase() {
  if [ "$phase_start" != 0 ]; then
    echo "   (took $(awk -v a="$phase_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s)"
  fi
  phase_start=$(date +%s.%N)
  if [ $# -gt 0 ]; then echo "$*"; fi
}
phase "== 1. lower examples/serving_step.mlir to PTX (sm_90) and assemble it"
lower serving_step
# One gpu.binary per launched kernel; each one's PTX is assembled alone.
rm -rf "$out/ptx"
python3 "$root/utils/extract-ptx.py" "$out/serving_step.nvvm.mlir" --split "$out/ptx"
echo "   $(ls "$out/ptx" | wc -l) kernel modules, PTX in $out/ptx"
assemble serving_step

phase "== 2. run chunked prefill + decode over a ragged batch"
if have_gpu && [ -x "$build/bin/kpool-gpu-demo" ]; then
  "$build/bin/kpool-gpu-demo"
else
  echo "   (no GPU here: running on the CPU)"
  "$build/bin/kpool-demo" --verbose
fi

phase "== 3. the production pool cache: examples/serving_step_cache.mlir to PTX"
lower serving_step_cache
assemble serving_step_cache

phase "== 4. a serving schedule into a paged FP8 cache, every byte checked"
on_gpu_or_emulated kpool-gpu-cache-check
phase
