#!/usr/bin/env bash
# The main job, on an already built tree: lower a serving step to PTX for
# sm_90 and assemble it, then run chunked prefill + decode through the
# kernels and check every pool (GPU when present, CPU otherwise); then the
# same for the production pool cache (paged, Hadamard-rotated FP8): the
# step with its cache assembled for sm_90, and a serving schedule into the
# cache with every byte checked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KPOOL_BUILD_DIR:-$root/build}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

echo "== 1. lower examples/serving_step.mlir to PTX (sm_90) and assemble it"
out="$build/demo"
mkdir -p "$out"
"$build/bin/kpool-opt" "$root/examples/serving_step.mlir" \
  -kpool-lower-to-nvvm="format=isa" -o "$out/serving_step.nvvm.mlir"
# One gpu.binary per launched kernel; each one's PTX is assembled alone.
rm -rf "$out/ptx"
python3 "$root/utils/extract-ptx.py" "$out/serving_step.nvvm.mlir" --split "$out/ptx"
echo "   $(ls "$out/ptx" | wc -l) kernel modules, PTX in $out/ptx"
if [ -x "$CUDA_HOME/bin/ptxas" ]; then
  python3 "$root/utils/extract-ptx.py" "$out/serving_step.nvvm.mlir" \
    --ptxas "$CUDA_HOME/bin/ptxas" --arch sm_90 --no-extern | sed 's/^/   /'
else
  echo "   ptxas not found under $CUDA_HOME: skipped assembling"
fi

echo "== 2. run chunked prefill + decode over a ragged batch"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
   && [ -x "$build/bin/kpool-gpu-demo" ]; then
  "$build/bin/kpool-gpu-demo"
else
  echo "   (no GPU here: running on the CPU)"
  "$build/bin/kpool-demo" --verbose
fi

echo "== 3. the production pool cache: examples/serving_step_cache.mlir to PTX"
"$build/bin/kpool-opt" "$root/examples/serving_step_cache.mlir" \
  -kpool-lower-to-nvvm="format=isa" -o "$out/serving_step_cache.nvvm.mlir"
if [ -x "$CUDA_HOME/bin/ptxas" ]; then
  python3 "$root/utils/extract-ptx.py" "$out/serving_step_cache.nvvm.mlir" \
    --ptxas "$CUDA_HOME/bin/ptxas" --arch sm_90 --no-extern | sed 's/^/   /'
else
  echo "   ptxas not found under $CUDA_HOME: skipped assembling"
fi

echo "== 4. a serving schedule into a paged FP8 cache, every byte checked"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
   && [ -x "$build/bin/kpool-gpu-cache-check" ]; then
  "$build/bin/kpool-gpu-cache-check"
else
  echo "   (no GPU here: the same program over the CPU kernels)"
  "$build/bin/kpool-gpu-cache-check-emulated"
fi
