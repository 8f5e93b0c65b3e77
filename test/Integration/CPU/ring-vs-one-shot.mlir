// A pool whose tokens arrive over two calls (chunk boundary inside the pool,
// the first members parked in a non-identity ring slot) is bit-identical to
// the same pool built by one-shot compression, and a pool built over a
// prefix is bit-identical to the same pool built over the whole sequence.
// bf16, kpool 3 (not a power of two), head_dim 4, non-zero ape and large
// gates so that the softmax discriminates. The check counts differing bits
// in the IR itself.
//
// Call 1 brings tokens 0..4 of a request in slot 2 of a 3-slot ring:
// compress builds pool 0, seed_tail parks tokens 3 and 4. Call 2 brings
// tokens 5 and 6: ring_close closes pool 1 from ring members 3, 4 and row 0
// (token 5), compress builds nothing, seed_tail parks token 6.

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s
// RUN: kpool-opt %s -kpool-lower-to-llvm="vector-size=0" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

!rows = tensor<?x4xbf16>
!meta = tensor<?xi32>

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n1 = arith.constant 1 : i32
  %all_k = arith.constant dense<[
      [0.5, -1.25, 2.0, 3.5], [1.5, 0.75, -2.0, 0.25], [-0.5, 2.25, 1.0, -3.0],
      [2.5, -0.75, 0.5, 1.0], [-1.5, 1.25, -1.0, 2.0], [0.25, -2.5, 3.0, -0.5],
      [1.0, 1.0, 1.0, 1.0]]> : tensor<7x4xbf16>
  %all_g = arith.constant dense<[
      [3.0, -2.5, 5.0, 0.5], [-4.0, 6.0, 1.5, -1.0], [2.0, 0.0, -3.5, 4.5],
      [-6.0, 3.5, 2.5, -2.0], [5.5, -1.5, 0.0, 3.0], [1.0, 4.0, -5.0, 2.5],
      [0.0, 0.0, 0.0, 0.0]]> : tensor<7x4xbf16>
  %ape = arith.constant dense<[[0.5, -1.0, 1.5, 0.25],
                               [-0.75, 2.0, -0.5, 1.0],
                               [1.25, -0.25, 0.75, -1.5]]> : tensor<3x4xf32>
  %slots = arith.constant dense<[2]> : tensor<1xi32>

  // One shot: 7 tokens, pools 0 and 1.
  %iro_all = arith.constant dense<[0, 7]> : tensor<2xi32>
  %cache_0 = arith.constant dense<[0]> : tensor<1xi32>
  %iro_all_d = tensor.cast %iro_all : tensor<2xi32> to !meta
  %cache_0_d = tensor.cast %cache_0 : tensor<1xi32> to !meta
  %all_k_d = tensor.cast %all_k : tensor<7x4xbf16> to !rows
  %all_g_d = tensor.cast %all_g : tensor<7x4xbf16> to !rows
  %one_shot = call @compress(%all_k_d, %all_g_d, %ape, %iro_all_d, %cache_0_d)
      : (!rows, !rows, tensor<3x4xf32>, !meta, !meta) -> !rows

  // Call 1: tokens 0..4.
  %k1 = tensor.extract_slice %all_k[0, 0] [5, 4] [1, 1] : tensor<7x4xbf16> to tensor<5x4xbf16>
  %g1 = tensor.extract_slice %all_g[0, 0] [5, 4] [1, 1] : tensor<7x4xbf16> to tensor<5x4xbf16>
  %k1d = tensor.cast %k1 : tensor<5x4xbf16> to !rows
  %g1d = tensor.cast %g1 : tensor<5x4xbf16> to !rows
  %iro_1 = arith.constant dense<[0, 5]> : tensor<2xi32>
  %iro_1d = tensor.cast %iro_1 : tensor<2xi32> to !meta
  %slots_d = tensor.cast %slots : tensor<1xi32> to !meta
  %prefix = call @compress(%k1d, %g1d, %ape, %iro_1d, %cache_0_d)
      : (!rows, !rows, tensor<3x4xf32>, !meta, !meta) -> !rows
  %ring0 = arith.constant dense<0.0> : tensor<3x2x3x4xbf16>
  %ring1 = kpool.seed_tail kpool(3) head_dim(4)
      ins(%k1d, %g1d, %iro_1d, %cache_0_d, %slots_d
          : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n1) outs(%ring0 : tensor<3x2x3x4xbf16>) -> tensor<3x2x3x4xbf16>

  // Call 2: tokens 5 and 6, five tokens cached.
  %k2 = tensor.extract_slice %all_k[5, 0] [2, 4] [1, 1] : tensor<7x4xbf16> to tensor<2x4xbf16>
  %g2 = tensor.extract_slice %all_g[5, 0] [2, 4] [1, 1] : tensor<7x4xbf16> to tensor<2x4xbf16>
  %k2d = tensor.cast %k2 : tensor<2x4xbf16> to !rows
  %g2d = tensor.cast %g2 : tensor<2x4xbf16> to !rows
  %iro_2 = arith.constant dense<[0, 2]> : tensor<2xi32>
  %cache_5 = arith.constant dense<[5]> : tensor<1xi32>
  %iro_2d = tensor.cast %iro_2 : tensor<2xi32> to !meta
  %cache_5d = tensor.cast %cache_5 : tensor<1xi32> to !meta
  %closed_rows0 = arith.constant dense<7.0> : tensor<1x4xbf16>
  %closed_ids0 = arith.constant dense<7> : tensor<1xi32>
  %closed_rows0_d = tensor.cast %closed_rows0 : tensor<1x4xbf16> to !rows
  %closed_ids0_d = tensor.cast %closed_ids0 : tensor<1xi32> to tensor<?xi32>
  %closed_rows, %closed_ids = kpool.ring_close kpool(3) head_dim(4)
      ins(%ring1, %k2d, %g2d, %ape, %iro_2d, %cache_5d, %slots_d
          : tensor<3x2x3x4xbf16>, !rows, !rows, tensor<3x4xf32>, !meta, !meta, !meta)
      num_requests(%n1) outs(%closed_rows0_d, %closed_ids0_d : !rows, tensor<?xi32>)
      -> !rows, tensor<?xi32>
  %new_pools = call @compress(%k2d, %g2d, %ape, %iro_2d, %cache_5d)
      : (!rows, !rows, tensor<3x4xf32>, !meta, !meta) -> !rows

  // CHECK: closed pool id
  // CHECK-NEXT: 1
  vector.print str "closed pool id\n"
  %id = tensor.extract %closed_ids[%c0] : tensor<?xi32>
  vector.print %id : i32
  // CHECK-NEXT: pools built by compress in call 2
  // CHECK-NEXT: 0
  vector.print str "pools built by compress in call 2\n"
  %nnew = tensor.dim %new_pools, %c0 : !rows
  vector.print %nnew : index

  // CHECK-NEXT: differing bits, pool 0 over the prefix vs the whole sequence
  // CHECK-NEXT: 0
  vector.print str "differing bits, pool 0 over the prefix vs the whole sequence\n"
  %d0 = call @differing_bits(%prefix, %c0, %one_shot, %c0) : (!rows, index, !rows, index) -> i32
  vector.print %d0 : i32
  // CHECK-NEXT: differing bits, pool 1 closed from the ring vs one shot
  // CHECK-NEXT: 0
  vector.print str "differing bits, pool 1 closed from the ring vs one shot\n"
  %d1 = call @differing_bits(%closed_rows, %c0, %one_shot, %c1) : (!rows, index, !rows, index) -> i32
  vector.print %d1 : i32
  // The check itself can fail: pools 0 and 1 differ.
  // CHECK-NEXT: differing bits, pool 0 vs pool 1
  // CHECK-NEXT: {{[1-9][0-9]*}}
  vector.print str "differing bits, pool 0 vs pool 1\n"
  %d2 = call @differing_bits(%one_shot, %c0, %one_shot, %c1) : (!rows, index, !rows, index) -> i32
  vector.print %d2 : i32
  return
}

/// compress over one request, with pool_row_offsets from kpool.pool_offsets
/// and an output sized by its last entry.
func.func @compress(%k: !rows, %g: !rows, %ape: tensor<3x4xf32>, %iro: !meta,
                    %cache: !meta) -> !rows {
  %c1 = arith.constant 1 : index
  %pro0 = tensor.empty() : tensor<2xi32>
  %pro0d = tensor.cast %pro0 : tensor<2xi32> to !meta
  %pro = kpool.pool_offsets kpool(3) ins(%iro, %cache : !meta, !meta)
      outs(%pro0d : !meta) -> !meta
  %last = tensor.extract %pro[%c1] : !meta
  %rows = arith.index_castui %last : i32 to index
  %init = tensor.empty(%rows) : !rows
  %pooled = kpool.compress kpool(3) head_dim(4)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !rows, !rows, tensor<3x4xf32>, !meta, !meta, !meta)
      outs(%init : !rows) -> !rows
  return %pooled : !rows
}

/// Number of channels whose bits differ between row %i of %a and row %j of %b.
func.func @differing_bits(%a: !rows, %i: index, %b: !rows, %j: index) -> i32 {
  %ra = tensor.extract_slice %a[%i, 0] [1, 4] [1, 1] : !rows to tensor<4xbf16>
  %rb = tensor.extract_slice %b[%j, 0] [1, 4] [1, 1] : !rows to tensor<4xbf16>
  %zero = arith.constant 0 : i32
  %init = tensor.from_elements %zero : tensor<i32>
  %count = linalg.generic {
      indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (d)>,
                       affine_map<(d) -> ()>],
      iterator_types = ["reduction"]}
      ins(%ra, %rb : tensor<4xbf16>, tensor<4xbf16>) outs(%init : tensor<i32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: i32):
    %xb = arith.bitcast %x : bf16 to i16
    %yb = arith.bitcast %y : bf16 to i16
    %ne = arith.cmpi ne, %xb, %yb : i16
    %one = arith.extui %ne : i1 to i32
    %sum = arith.addi %acc, %one : i32
    linalg.yield %sum : i32
  } -> tensor<i32>
  %r = tensor.extract %count[] : tensor<i32>
  return %r : i32
}
