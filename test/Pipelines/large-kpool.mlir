// Large kpool: above 16 members the pooling function loops over the members
// instead of taking one linalg.generic input per member row (issue 9, item
// 4: the unrolled form took 9.6 s to lower at kpool 4096 and hung the JIT at
// 2^20). The IR no longer grows with kpool, so both pipelines stay fast up
// to the verifier's bound of 2^32 (python/tests/test_bad_input.py times the
// JIT; the schedules there check the loop form's bits).

// RUN: kpool-opt %s -one-shot-bufferize=bufferize-function-boundaries -convert-kpool-to-linalg | FileCheck %s
// RUN: kpool-opt %s -kpool-lower-to-llvm -o /dev/null
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa approximate-exp=true" -o %t.nvvm.mlir
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.nvvm.mlir --count | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ %python %kpool_src_root/utils/extract-ptx.py %t.nvvm.mlir --ptxas %ptxas --no-extern | FileCheck %s --check-prefix=PTXAS %}
// PTXAS: @compress_k17_kpool_compress: ptxas ok
// PTXAS: @ring_close_k2p32_kpool_ring_close_mismatch: ptxas ok

// CHECK-LABEL: func @compress_k17
//       CHECK:   linalg.generic {indexing_maps = [#{{[a-z0-9]+}}], iterator_types = ["parallel"]} outs({{.*}}) attrs = {kpool.pool_row_loop} {
//       CHECK:     linalg.index 0
//       CHECK:     scf.for
//       CHECK:       arith.maximumf
//       CHECK:     math.exp
//       CHECK:     scf.for
//       CHECK:       math.exp
//       CHECK:     arith.divf
func.func @compress_k17(%k: tensor<?x8xf32>, %g: tensor<?x8xf32>,
    %ape: tensor<17x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %o: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %r = kpool.compress kpool(17) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : tensor<?x8xf32>, tensor<?x8xf32>, tensor<17x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%o : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// 16 members are still unrolled (vectorizable), one input per member row.
// CHECK-LABEL: func @compress_k16
//   CHECK-NOT:   kpool.pool_row_loop
//       CHECK:   linalg.generic {{.*}} ins({{.*}}) outs({{.*}}) attrs = {kpool.pool_row} {
func.func @compress_k16(%k: tensor<?x8xf32>, %g: tensor<?x8xf32>,
    %ape: tensor<16x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %o: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %r = kpool.compress kpool(16) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : tensor<?x8xf32>, tensor<?x8xf32>, tensor<16x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%o : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// The largest kpool the verifier accepts, in ring_close (ring members read
// through the loop) and compress.
// CHECK-LABEL: func @ring_close_k2p32
//       CHECK:   kpool.pool_row_loop
func.func @ring_close_k2p32(%tail: tensor<?x2x?x8xbf16>, %k: tensor<?x8xbf16>,
    %ape: tensor<?x8xf32>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32, %p: tensor<?x8xbf16>,
    %c: tensor<?xi32>) -> (tensor<?x8xbf16>, tensor<?xi32>) {
  %rp, %rc = kpool.ring_close kpool(4294967296) head_dim(8)
      ins(%tail, %k, %k, %ape, %iro, %cache, %slots
          : tensor<?x2x?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<?x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%p, %c : tensor<?x8xbf16>, tensor<?xi32>)
      -> tensor<?x8xbf16>, tensor<?xi32>
  return %rp, %rc : tensor<?x8xbf16>, tensor<?xi32>
}

// PTX: {{[0-9]+}}
