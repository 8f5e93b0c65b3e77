#!/usr/bin/env bash
# The GPU checks and benchmarks, for a machine with an NVIDIA GPU (sm_90)
# and no LLVM/MLIR: runs kpool-gpu-check, kpool-gpu-cache-check (the fused
# step into a paged FP8 pool cache), kpool-gpu-capture (a serving step
# captured with cuStreamBeginCapture into a CUDA graph, instantiated and
# replayed with metadata rewritten in place, bit-identical to eager, a second
# stream running its own schedule, per-step times from CUDA events, and a
# child forked before the first CUDA call), kpool-gpu-demo and kpool-bench-gpu
# from a pack folder (and benchmarks/torch_compress.py when PyTorch imports),
# each under a timeout, prints everything and exits non-zero when any check
# fails (2 when there is no usable GPU).
#
# Make the pack on a machine with the CUDA toolkit (no GPU needed):
#   scripts/build.sh kpool-gpu-pack          # -> build/gpu-pack, about 3 MiB
# (or ninja -C <build> kpool-gpu-pack in any build folder: <build>/gpu-pack).
# The executables need only glibc, libstdc++ and libkpool_cuda_runtime.so
# (next to them, found through RPATH $ORIGIN), which needs libcuda.so.1.
#
# With the device tool, from a session whose task is lent a GPU (the pack
# is an ignored folder, so it must be carried; the tree travels as it is):
#   run(command="set -o pipefail; bash scripts/device-check.sh build/gpu-pack 2>&1 | tee $OUT/device-check.log",
#       carry=["build/gpu-pack"], timeout_s=420)
# Without an argument the script uses the folder it sits in when that holds
# the executables (a copy in the pack), else build/gpu-pack.
# The steps' timeouts (90 + 45 + 45 + 45 + 45 + 90 + 60 + 90 s) bound the run
# at under 9 minutes; it should take well under two once the machine is up.
#
# If the device's loader rejects a binary (a missing library or symbol
# version, as `ldd` reports it), the script relinks the executables there
# from the objects and static libraries in <pack>/relink with the device's
# c++, and rebuilds libkpool_cuda_runtime.so from its source.
#
# Environment: KPOOL_GPU_SPECULATIVE (verify schedules per configuration in
# kpool-gpu-check, default 300), KPOOL_BENCH_TOKENS (default 1048576), KPOOL_BENCH_TORCH=0 to
# skip the PyTorch baseline, KPOOL_TORCH_COMPILE=0 not to time its
# torch.compile (Triton) peer, KPOOL_RELINK=1 to relink even when the loader is content.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ge 1 ]; then
  pack="$1"
elif [ -x "$here/kpool-gpu-check" ]; then
  pack="$here"
else
  pack="$here/../build/gpu-pack"
fi
wanted="$pack"
pack="$(cd "$pack" 2>/dev/null && pwd)" || {
  echo "device-check: no pack folder '$wanted' (make it with ninja kpool-gpu-pack)"
  exit 1
}
tokens="${KPOOL_BENCH_TOKENS:-1048576}"
for f in kpool-gpu-check kpool-gpu-capture kpool-gpu-cache-check kpool-gpu-demo kpool-bench-gpu libkpool_cuda_runtime.so; do
  if [ ! -e "$pack/$f" ]; then
    echo "device-check: $pack/$f is missing (make the pack with ninja kpool-gpu-pack)"
    exit 1
  fi
done

echo "== machine"
uname -srm
command -v nvidia-smi >/dev/null && nvidia-smi -L
ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1' || echo "libcuda.so.1 is not in the loader cache"
echo "== loader check (ldd kpool-gpu-check)"
ldd "$pack/kpool-gpu-check"

if ldd "$pack/libkpool_cuda_runtime.so" | grep -q 'libcuda.so.1 => not found'; then
  echo "device-check: no CUDA driver here (libcuda.so.1 is not found); the GPU executables cannot run"
  exit 2
fi

# Relink here when the loader rejects what was built elsewhere
# (KPOOL_RELINK=1 forces it).
if [ "${KPOOL_RELINK:-0}" = 1 ] ||
    ldd "$pack/kpool-gpu-check" "$pack/libkpool_cuda_runtime.so" |
    grep -v 'libcuda.so' | grep -q 'not found'; then
  echo "== relinking here (KPOOL_RELINK=${KPOOL_RELINK:-0}; otherwise the loader rejected the carried binaries)"
  work="$(mktemp -d)"
  cp -r "$pack"/. "$work"/
  pack="$work"
  r="$pack/relink"
  cuda="${CUDA_HOME:-/usr/local/cuda}"
  c++ -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -I"$cuda/include" \
    -I"$r" -I"$r/include" "$r/CudaRuntimeWrappers.cpp" "$r/CudaSupport.cpp" \
    -o "$pack/libkpool_cuda_runtime.so" \
    -L"$cuda/lib64/stubs" -L"$cuda/lib/stubs" -lcuda || exit 1
  for exe in kpool-gpu-check kpool-gpu-capture kpool-gpu-cache-check kpool-gpu-demo kpool-bench-gpu; do
    c++ -o "$pack/$exe" "$r/$exe.o" "$r"/libKPoolGpuSupport.a \
      "$r"/libkpool_gpu_*.a "$r"/libKPoolRuntimeCore.a "$r"/libKPoolReference.a \
      -L"$pack" -lkpool_cuda_runtime -Wl,-rpath,'$ORIGIN' -ldl \
      -L"$cuda/lib64/stubs" -L"$cuda/lib/stubs" -lcuda || exit 1
  done
  ldd "$pack/kpool-gpu-check"
fi

failures=()
step() { # name, timeout, command...
  local name="$1" limit="$2"
  shift 2
  echo "== $name"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "device-check: $name timed out after ${limit}s"
  if [ $rc -ne 0 ]; then
    failures+=("$name (exit $rc)")
    [ $rc -eq 2 ] && no_gpu=1
  fi
  return 0
}
no_gpu=0
# Case (f), random speculative-decoding schedules: every step allocates and
# synchronizes, so the device runs 300 (as the suite does through the
# emulated CUDA driver) rather than the program's 2000.
step kpool-gpu-check 90 "$pack/kpool-gpu-check" \
  --speculative="${KPOOL_GPU_SPECULATIVE:-300}"
if [ $no_gpu -eq 1 ]; then
  echo "device-check: no usable GPU here; nothing else to run"
  exit 2
fi
# Capture and replay: 50 replays, two streams, CUDA-event step times; then
# the same in a child forked before any CUDA call, and in the parent after.
step kpool-gpu-capture 45 "$pack/kpool-gpu-capture" --steps=50
step kpool-gpu-capture-fork 45 "$pack/kpool-gpu-capture" --fork --steps=8
# The pool cache: the fused step into a paged FP8 Hadamard cache, every
# entry byte-exact against the formulas on the device's dense pools (warp
# shuffles, the hardware FP8 conversion, the guards).
step kpool-gpu-cache-check 45 "$pack/kpool-gpu-cache-check"
step kpool-gpu-demo 45 "$pack/kpool-gpu-demo"
step kpool-bench-gpu 90 "$pack/kpool-bench-gpu" "$tokens"
# Compress at 8M tokens against a device copy of the same bytes (the
# decode-step figures repeat; they are cheap).
step kpool-bench-gpu-8M 60 "$pack/kpool-bench-gpu" 8388608 64

torch_script="$pack/torch_compress.py"
[ -f "$torch_script" ] || torch_script="$here/../benchmarks/torch_compress.py"
if [ "${KPOOL_BENCH_TORCH:-1}" != 0 ]; then
  echo "== PyTorch baseline"
  if python3 -c 'import torch' 2>/dev/null; then
    extra=()
    [ "${KPOOL_TORCH_COMPILE:-1}" = 1 ] && extra=(--compile)
    # A baseline, not a check: its failure is reported, not counted.
    PYTHONUNBUFFERED=1 timeout --kill-after=10 90 python3 "$torch_script" \
      --tokens "$tokens" "${extra[@]}" ||
      echo "device-check: the PyTorch baseline failed (exit $?); not a check"
  else
    echo "device-check: python3 cannot import torch; no PyTorch baseline"
  fi
fi

echo "== summary"
if [ ${#failures[@]} -eq 0 ]; then
  echo "device-check: all GPU checks passed"
  exit 0
fi
printf 'device-check: FAILED: %s\n' "${failures[@]}"
exit 1
