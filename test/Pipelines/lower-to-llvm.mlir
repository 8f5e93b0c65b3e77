// kpool-lower-to-llvm on the buffer form (bufferize=false): every op lowers to
// the LLVM dialect only (plus omp with openmp=true), and the module
// translates to LLVM IR.
//
// DEFINE: %{llvm_only} = --implicit-check-not=" kpool." --implicit-check-not=" linalg." --implicit-check-not=" scf." --implicit-check-not=" memref." --implicit-check-not=" vector." --implicit-check-not=" arith." --implicit-check-not=" math." --implicit-check-not=" cf." --implicit-check-not=" affine." --implicit-check-not=" bufferization." --implicit-check-not=" ub." --implicit-check-not=unrealized_conversion_cast
//
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false" | FileCheck %s %{llvm_only} --implicit-check-not=" omp."
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false openmp=true" | FileCheck %s --check-prefix=OMP %{llvm_only}
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false openmp=true" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=OMP-IR
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false vector-size=0" | FileCheck %s --check-prefix=SCALAR %{llvm_only} --implicit-check-not=" omp." --implicit-check-not="vector<"
// RUN: kpool-opt %s -kpool-lower-to-llvm="bufferize=false vector-size=8" | FileCheck %s --check-prefix=VS8 %{llvm_only} --implicit-check-not=" omp." --implicit-check-not="vector<16x"

// CHECK-LABEL: llvm.func @compress(
//       CHECK:   llvm.load {{.*}} -> vector<16xbf16>
//       CHECK:   llvm.store {{.*}} : vector<16xbf16>, !llvm.ptr
//       CHECK:   llvm.return
// IR-LABEL: define void @compress(
//       IR:   load <16 x bfloat>
// OMP-LABEL: llvm.func @compress(
//       OMP:   omp.parallel
//       OMP:     omp.wsloop
//       OMP:       omp.loop_nest
// OMP-IR-LABEL: define void @compress(
//       OMP-IR:   call void {{.*}}@__kmpc_fork_call
// SCALAR-LABEL: llvm.func @compress(
//       SCALAR:   llvm.fdiv {{.*}} : f32
// VS8-LABEL: llvm.func @compress(
//       VS8:   llvm.load {{.*}} -> vector<8xbf16>
func.func @compress(%k: memref<?x128xbf16>, %gate: memref<?x128xbf16>,
    %ape: memref<4x128xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x128xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16>, memref<?x128xbf16>, memref<4x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16>)
  return
}

// Fully dynamic strides: unit-stride and general versions, both lowered.
// CHECK-LABEL: llvm.func @compress_strided(
//       CHECK:   llvm.load {{.*}} -> vector<16xf16>
//       CHECK:   llvm.return
// IR-LABEL: define void @compress_strided(
func.func @compress_strided(%k: memref<?x64xf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x64xf16, strided<[?, ?], offset: ?>>,
    %ape: memref<4x64xf32, strided<[?, ?], offset: ?>>,
    %iro: memref<?xi32, strided<[?], offset: ?>>, %pro: memref<?xi32>,
    %cache: memref<?xi32>,
    %pooled: memref<?x64xf16, strided<[?, ?], offset: ?>>) {
  kpool.compress kpool(4) head_dim(64)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x64xf16, strided<[?, ?], offset: ?>>,
            memref<?x64xf16, strided<[?, ?], offset: ?>>,
            memref<4x64xf32, strided<[?, ?], offset: ?>>,
            memref<?xi32, strided<[?], offset: ?>>, memref<?xi32>,
            memref<?xi32>)
      outs(%pooled : memref<?x64xf16, strided<[?, ?], offset: ?>>)
  return
}

// CHECK-LABEL: llvm.func @seed_tail(
//       CHECK:   llvm.return
// IR-LABEL: define void @seed_tail(
// OMP-LABEL: llvm.func @seed_tail(
//       OMP:   omp.parallel
func.func @seed_tail(%tail: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16>, %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32) {
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>)
  return
}

// CHECK-LABEL: llvm.func @ring_close(
//       CHECK:   llvm.load {{.*}} -> vector<16xbf16>
//       CHECK:   llvm.return
// IR-LABEL: define void @ring_close(
// OMP-LABEL: llvm.func @ring_close(
//       OMP:   omp.parallel
func.func @ring_close(%tail: memref<?x2x3x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
    %k: memref<?x128xbf16>, %gate: memref<?x128xbf16>, %ape: memref<3x128xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %pooled: memref<?x128xbf16>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(3) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x3x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
            memref<?x128xbf16>, memref<?x128xbf16>, memref<3x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x128xbf16>, memref<?xi32>)
  return
}

// CHECK-LABEL: llvm.func @pool_offsets(
//       CHECK:   llvm.return
// IR-LABEL: define void @pool_offsets(
func.func @pool_offsets(%iro: memref<?xui32>, %cache: memref<?xui32>,
    %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(1)
      ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}
