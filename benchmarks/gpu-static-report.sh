#!/usr/bin/env bash
# The static GPU report (no GPU needed; the figures are static): kpool's
# kernels for the production configuration (examples/serving_step.mlir:
# bf16, head_dim 128, kpool 4, lowered by kpool-lower-to-nvvm for sm_90)
# next to a hand-written CUDA compress of the same semantics
# (benchmarks/cuda/handwritten-compress.cu, compiled with nvcc -ptx when
# nvcc is there). Columns: see utils/ptx-report.py and docs/gpu.md.
#
#   benchmarks/gpu-static-report.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${KPOOL_BUILD_DIR:-$root/build}}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

ptxas=()
if [ -x "$cuda/bin/ptxas" ]; then
  ptxas=(--ptxas "$cuda/bin/ptxas")
else
  ptxas=(--no-ptxas)
  echo "(no ptxas under $cuda: PTX counts only)"
fi

echo "== kpool: examples/serving_step.mlir, kpool-lower-to-nvvm (sm_90), one kernel per op"
"$build/bin/kpool-opt" "$root/examples/serving_step.mlir" \
  -kpool-lower-to-nvvm="format=isa fuse-step=false" -o "$out/ops.mlir"
python3 "$root/utils/ptx-report.py" "$out/ops.mlir" "${ptxas[@]}"

echo "== kpool: the same step fused into one kpool.step (the pipeline's default)"
"$build/bin/kpool-opt" "$root/examples/serving_step.mlir" \
  -kpool-lower-to-nvvm="format=isa" -o "$out/step.mlir"
python3 "$root/utils/ptx-report.py" "$out/step.mlir" "${ptxas[@]}"

echo "== kpool: the fused step writing the production pool cache (paged FP8, Hadamard; examples/serving_step_cache.mlir)"
"$build/bin/kpool-opt" "$root/examples/serving_step_cache.mlir" \
  -kpool-lower-to-nvvm="format=isa" -o "$out/step-cache.mlir"
python3 "$root/utils/ptx-report.py" "$out/step-cache.mlir" "${ptxas[@]}"

if [ -x "$cuda/bin/nvcc" ]; then
  echo "== hand-written: benchmarks/cuda/handwritten-compress.cu (nvcc -O3 -arch=sm_90)"
  "$cuda/bin/nvcc" -arch=sm_90 -O3 -ptx \
    "$root/benchmarks/cuda/handwritten-compress.cu" -o "$out/handwritten.ptx"
  python3 "$root/utils/ptx-report.py" "$out/handwritten.ptx" "${ptxas[@]}"
else
  echo "(no nvcc under $cuda: no hand-written baseline)"
fi
