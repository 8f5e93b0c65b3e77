// Runs the program of Inputs/agreement-program.mlir on the GPU: kernels from
// kpool-lower-to-nvvm (fatbin, cubin for sm_90 plus PTX), device buffers
// and copies through gpu.alloc/gpu.memcpy (made asynchronous by
// gpu-async-region, as the GPU-to-LLVM lowering requires), executed by
// mlir-runner with the project's CUDA runtime wrappers -- on a GPU, or
// through the emulated CUDA driver (test/lib/CudaEmu), which reads the PTX
// the fatbin carries (zstd-compressed) and executes it.
//
// REQUIRES: ptx-executor
//
// 1. The program's own checks (its CHECK lines): pools agree bit for bit
//    across chunkings (ring_close vs compress), across the vector and
//    scalar channel paths and the non-unit-stride kernels; closed pool ids,
//    pool offsets and the ring are as the spec says.
// 2. With approximate-exp the kernels do the arithmetic the mapped IR does
//    on the CPU (test/Conversion/KPoolToGPU/map-to-gpu-emulate-agreement.test runs the
//    same IR through sequential loops): the pools must be the same bits.
// 3. With libdevice's exp (the default) the pools must match the CPU
//    pipeline's within a few bf16 units in the last place (the spec's
//    cross-backend tolerance).
//
// The file itself holds no IR: the program is concatenated from Inputs.
//
// RUN: cat %S/Inputs/agreement-program.mlir %S/Inputs/device-gpu.mlir > %t.gpu.mlir
// RUN: cat %S/Inputs/agreement-program.mlir %S/Inputs/device-host.mlir > %t.host.mlir
//
// RUN: kpool-opt %t.gpu.mlir --pass-pipeline="builtin.module(func.func(gpu-async-region),kpool-lower-to-nvvm{bufferize=false})" -o %t.libdevice.mlir
// RUN: mlir-runner %t.libdevice.mlir -e main -entry-point-result=void -shared-libs=%kpool_cuda_runtime,%mlir_c_runner_utils,%mlir_runner_utils > %t.libdevice
// RUN: FileCheck %S/Inputs/agreement-program.mlir < %t.libdevice
//
// RUN: kpool-opt %t.gpu.mlir --pass-pipeline="builtin.module(func.func(gpu-async-region),kpool-lower-to-nvvm{bufferize=false approximate-exp=true})" -o %t.approx.mlir
// RUN: mlir-runner %t.approx.mlir -e main -entry-point-result=void -shared-libs=%kpool_cuda_runtime,%mlir_c_runner_utils,%mlir_runner_utils > %t.approx
// RUN: FileCheck %S/Inputs/agreement-program.mlir < %t.approx
//
// RUN: kpool-opt %t.host.mlir -convert-kpool-to-linalg -kpool-map-to-gpu=approximate-exp=true -o %t.mapped.mlir
// RUN: %python %kpool_src_root/utils/launch-to-loops.py %t.mapped.mlir -o %t.loops.mlir
// RUN: kpool-opt %t.loops.mlir -convert-linalg-to-loops -convert-vector-to-scf -lower-affine -convert-scf-to-cf -expand-strided-metadata -lower-affine -convert-to-llvm -reconcile-unrealized-casts -o %t.emulated.mlir
// RUN: mlir-runner %t.emulated.mlir -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils > %t.emulated
// RUN: %python %S/Inputs/compare-pools.py --exact %t.approx %t.emulated
//
// RUN: kpool-opt %t.host.mlir -kpool-lower-to-llvm=bufferize=false -o %t.cpu.mlir
// RUN: mlir-runner %t.cpu.mlir -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils > %t.cpu
// RUN: %python %S/Inputs/compare-pools.py %t.libdevice %t.cpu
