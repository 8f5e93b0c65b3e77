// RUN: kpool-opt %s | kpool-opt | FileCheck %s
// RUN: kpool-opt %s --mlir-print-op-generic | kpool-opt | FileCheck %s
// RUN: kpool-opt %s -emit-bytecode | kpool-opt | FileCheck %s
// RUN: kpool-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of the four kpool ops in custom and generic form: value
// (tensor) and buffer (strided memref) form, bf16/f16/f32 keys, ui32 and i32
// metadata, static and dynamic token/batch counts, kpool 1, 3 and 4.

//===----------------------------------------------------------------------===//
// kpool.compress
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func @compress_tensor_dynamic
//  CHECK-SAME: (%[[K:.*]]: tensor<?x128xbf16>, %[[G:.*]]: tensor<?x128xbf16>, %[[APE:.*]]: tensor<4x128xf32>, %[[IRO:.*]]: tensor<?xui32>, %[[PRO:.*]]: tensor<?xui32>, %[[C:.*]]: tensor<?xui32>, %[[INIT:.*]]: tensor<?x128xbf16>)
//       CHECK:   %[[R:.*]] = kpool.compress kpool(4) head_dim(128)
//  CHECK-SAME:     ins(%[[K]], %[[G]], %[[APE]], %[[IRO]], %[[PRO]], %[[C]] : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
//  CHECK-SAME:     outs(%[[INIT]] : tensor<?x128xbf16>) -> tensor<?x128xbf16>
//       CHECK:   return %[[R]]
// GENERIC-LABEL: sym_name = "compress_tensor_dynamic"
//       GENERIC: "kpool.compress"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{head_dim = 128 : i64, kpool = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0>}>
//  GENERIC-SAME:   : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>, tensor<?x128xbf16>) -> tensor<?x128xbf16>
func.func @compress_tensor_dynamic(%k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>,
    %ape: tensor<4x128xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %init: tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  return %pooled : tensor<?x128xbf16>
}

// Static token, batch and pool counts, i32 metadata, f32 keys, kpool 3.
// CHECK-LABEL: func @compress_tensor_static_i32
//       CHECK:   kpool.compress kpool(3) head_dim(8)
//  CHECK-SAME:     : tensor<12x8xf32>, tensor<12x8xf32>, tensor<3x8xf32>, tensor<3xi32>, tensor<3xi32>, tensor<2xi32>)
//  CHECK-SAME:     outs(%{{.*}} : tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "compress_tensor_static_i32"
//       GENERIC: "kpool.compress"{{.*}} <{head_dim = 8 : i64, kpool = 3 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0>}>
func.func @compress_tensor_static_i32(%k: tensor<12x8xf32>, %gate: tensor<12x8xf32>,
    %ape: tensor<3x8xf32>, %iro: tensor<3xi32>, %pro: tensor<3xi32>,
    %cache: tensor<2xi32>, %init: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %pooled = kpool.compress kpool(3) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<12x8xf32>, tensor<12x8xf32>, tensor<3x8xf32>,
            tensor<3xi32>, tensor<3xi32>, tensor<2xi32>)
      outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %pooled : tensor<4x8xf32>
}

// Buffer form: no result, row-padded and fully dynamic strided views, kpool 1,
// f16, and ui32/i32 metadata mixed across operands.
// CHECK-LABEL: func @compress_memref_strided_kpool1
//  CHECK-SAME: (%[[K:.*]]: memref<?x64xf16, strided<[256, 1]>>, %[[G:.*]]: memref<?x64xf16, strided<[?, ?], offset: ?>>, %[[APE:.*]]: memref<1x64xf32>, %[[IRO:.*]]: memref<?xi32, strided<[?], offset: ?>>, %[[PRO:.*]]: memref<?xui32>, %[[C:.*]]: memref<?xi32>, %[[OUT:.*]]: memref<?x64xf16, strided<[?, 1], offset: ?>>)
//       CHECK:   kpool.compress kpool(1) head_dim(64)
//  CHECK-SAME:     ins(%[[K]], %[[G]], %[[APE]], %[[IRO]], %[[PRO]], %[[C]] : memref<?x64xf16, strided<[256, 1]>>, memref<?x64xf16, strided<[?, ?], offset: ?>>, memref<1x64xf32>, memref<?xi32, strided<[?], offset: ?>>, memref<?xui32>, memref<?xi32>)
//  CHECK-SAME:     outs(%[[OUT]] : memref<?x64xf16, strided<[?, 1], offset: ?>>){{$}}
//  CHECK-NEXT:   return
// GENERIC-LABEL: sym_name = "compress_memref_strided_kpool1"
//       GENERIC: "kpool.compress"{{.*}} <{head_dim = 64 : i64, kpool = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0>}>
//  GENERIC-SAME:   -> (){{$}}
func.func @compress_memref_strided_kpool1(
    %k: memref<?x64xf16, strided<[256, 1]>>,
    %gate: memref<?x64xf16, strided<[?, ?], offset: ?>>,
    %ape: memref<1x64xf32>, %iro: memref<?xi32, strided<[?], offset: ?>>,
    %pro: memref<?xui32>, %cache: memref<?xi32>,
    %pooled: memref<?x64xf16, strided<[?, 1], offset: ?>>) {
  kpool.compress kpool(1) head_dim(64)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x64xf16, strided<[256, 1]>>,
            memref<?x64xf16, strided<[?, ?], offset: ?>>, memref<1x64xf32>,
            memref<?xi32, strided<[?], offset: ?>>, memref<?xui32>,
            memref<?xi32>)
      outs(%pooled : memref<?x64xf16, strided<[?, 1], offset: ?>>)
  return
}

// Dynamic head_dim extents are accepted (checked at run time); discardable
// attributes survive the round trip.
// CHECK-LABEL: func @compress_memref_dynamic_extents
//       CHECK:   kpool.compress kpool(4) head_dim(128)
//  CHECK-SAME:     : memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
//  CHECK-SAME:     outs(%{{.*}} : memref<?x?xbf16>) {test.tag = "x"}
func.func @compress_memref_dynamic_extents(%k: memref<?x?xbf16>,
    %gate: memref<?x?xbf16>, %ape: memref<?x?xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>, %pooled: memref<?x?xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x?xbf16>) {test.tag = "x"}
  return
}

//===----------------------------------------------------------------------===//
// kpool.seed_tail
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func @seed_tail_tensor_dynamic
//  CHECK-SAME: (%[[TAIL:.*]]: tensor<?x2x4x128xbf16>, %[[K:.*]]: tensor<?x128xbf16>, %[[G:.*]]: tensor<?x128xbf16>, %[[IRO:.*]]: tensor<?xui32>, %[[C:.*]]: tensor<?xui32>, %[[S:.*]]: tensor<?xui32>, %[[N:.*]]: i32)
//       CHECK:   %[[R:.*]] = kpool.seed_tail kpool(4) head_dim(128)
//  CHECK-SAME:     ins(%[[K]], %[[G]], %[[IRO]], %[[C]], %[[S]] : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
//  CHECK-SAME:     num_requests(%[[N]])
//  CHECK-SAME:     outs(%[[TAIL]] : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
//       CHECK:   return %[[R]]
// GENERIC-LABEL: sym_name = "seed_tail_tensor_dynamic"
//       GENERIC: "kpool.seed_tail"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{head_dim = 128 : i64, kpool = 4 : i64}>
//  GENERIC-SAME:   : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>, i32, tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
func.func @seed_tail_tensor_dynamic(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32)
    -> tensor<?x2x4x128xbf16> {
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return %ring : tensor<?x2x4x128xbf16>
}

// CHECK-LABEL: func @seed_tail_tensor_static_i32
//       CHECK:   kpool.seed_tail kpool(3) head_dim(8)
//  CHECK-SAME:     : tensor<7x8xf32>, tensor<7x8xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>)
//  CHECK-SAME:     outs(%{{.*}} : tensor<6x2x3x8xf32>) -> tensor<6x2x3x8xf32>
func.func @seed_tail_tensor_static_i32(%tail: tensor<6x2x3x8xf32>,
    %k: tensor<7x8xf32>, %gate: tensor<7x8xf32>, %iro: tensor<4xi32>,
    %cache: tensor<3xi32>, %slots: tensor<3xi32>, %n: i32)
    -> tensor<6x2x3x8xf32> {
  %ring = kpool.seed_tail kpool(3) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<7x8xf32>, tensor<7x8xf32>, tensor<4xi32>, tensor<3xi32>,
            tensor<3xi32>)
      num_requests(%n)
      outs(%tail : tensor<6x2x3x8xf32>) -> tensor<6x2x3x8xf32>
  return %ring : tensor<6x2x3x8xf32>
}

// A ring aliased into a larger cache page: slot stride 2048, not 2*4*128.
// CHECK-LABEL: func @seed_tail_memref_padded_ring
//       CHECK:   kpool.seed_tail kpool(4) head_dim(128)
//  CHECK-SAME:     : memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
//  CHECK-SAME:     num_requests(%{{[a-z0-9_]+}})
//  CHECK-SAME:     outs(%{{.*}} : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>){{$}}
// GENERIC-LABEL: sym_name = "seed_tail_memref_padded_ring"
//       GENERIC: "kpool.seed_tail"
//  GENERIC-SAME:   memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>) -> (){{$}}
func.func @seed_tail_memref_padded_ring(
    %tail: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
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

// CHECK-LABEL: func @seed_tail_memref_kpool1_dynamic_strides
//       CHECK:   kpool.seed_tail kpool(1) head_dim(16)
//  CHECK-SAME:     outs(%{{.*}} : memref<?x2x1x16xf16, strided<[?, ?, ?, ?], offset: ?>>)
func.func @seed_tail_memref_kpool1_dynamic_strides(
    %tail: memref<?x2x1x16xf16, strided<[?, ?, ?, ?], offset: ?>>,
    %k: memref<5x16xf16>, %gate: memref<5x16xf16>, %iro: memref<3xi32>,
    %cache: memref<2xui32>, %slots: memref<2xi32>, %n: i32) {
  kpool.seed_tail kpool(1) head_dim(16)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<5x16xf16>, memref<5x16xf16>, memref<3xi32>, memref<2xui32>,
            memref<2xi32>)
      num_requests(%n)
      outs(%tail : memref<?x2x1x16xf16, strided<[?, ?, ?, ?], offset: ?>>)
  return
}

//===----------------------------------------------------------------------===//
// kpool.ring_close
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func @ring_close_tensor_dynamic
//  CHECK-SAME: (%[[TAIL:.*]]: tensor<?x2x4x128xbf16>, %[[K:.*]]: tensor<?x128xbf16>, %[[G:.*]]: tensor<?x128xbf16>, %[[APE:.*]]: tensor<4x128xf32>, %[[IRO:.*]]: tensor<?xui32>, %[[C:.*]]: tensor<?xui32>, %[[S:.*]]: tensor<?xui32>, %[[N:.*]]: i32, %[[PI:.*]]: tensor<?x128xbf16>, %[[CI:.*]]: tensor<?xi32>)
//       CHECK:   %[[R:.*]]:2 = kpool.ring_close kpool(4) head_dim(128)
//  CHECK-SAME:     ins(%[[TAIL]], %[[K]], %[[G]], %[[APE]], %[[IRO]], %[[C]], %[[S]] : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
//  CHECK-SAME:     num_requests(%[[N]])
//  CHECK-SAME:     outs(%[[PI]], %[[CI]] : tensor<?x128xbf16>, tensor<?xi32>) -> tensor<?x128xbf16>, tensor<?xi32>
//       CHECK:   return %[[R]]#0, %[[R]]#1
// GENERIC-LABEL: sym_name = "ring_close_tensor_dynamic"
//       GENERIC: "kpool.ring_close"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{head_dim = 128 : i64, kpool = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0>}>
//  GENERIC-SAME:   : (tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>, i32, tensor<?x128xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?xi32>)
func.func @ring_close_tensor_dynamic(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32, %pinit: tensor<?x128xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x128xbf16>, tensor<?xi32>) {
  %pooled, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  return %pooled, %closed : tensor<?x128xbf16>, tensor<?xi32>
}

// CHECK-LABEL: func @ring_close_tensor_static_i32
//       CHECK:   kpool.ring_close kpool(3) head_dim(8)
//  CHECK-SAME:     : tensor<6x2x3x8xf16>, tensor<9x8xf16>, tensor<9x8xf16>, tensor<3x8xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>)
//  CHECK-SAME:     outs(%{{.*}}, %{{.*}} : tensor<3x8xf16>, tensor<3xi32>) -> tensor<3x8xf16>, tensor<3xi32>
func.func @ring_close_tensor_static_i32(%tail: tensor<6x2x3x8xf16>,
    %k: tensor<9x8xf16>, %gate: tensor<9x8xf16>, %ape: tensor<3x8xf32>,
    %iro: tensor<4xi32>, %cache: tensor<3xi32>, %slots: tensor<3xi32>,
    %n: i32) -> (tensor<3x8xf16>, tensor<3xi32>) {
  %pinit = tensor.empty() : tensor<3x8xf16>
  %cinit = tensor.empty() : tensor<3xi32>
  %pooled, %closed = kpool.ring_close kpool(3) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<6x2x3x8xf16>, tensor<9x8xf16>, tensor<9x8xf16>,
            tensor<3x8xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<3x8xf16>, tensor<3xi32>)
      -> tensor<3x8xf16>, tensor<3xi32>
  return %pooled, %closed : tensor<3x8xf16>, tensor<3xi32>
}

// CHECK-LABEL: func @ring_close_memref_strided
//       CHECK:   kpool.ring_close kpool(4) head_dim(128)
//  CHECK-SAME:     ins(%{{.*}} : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>, memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<4x128xf32, strided<[?, ?], offset: ?>>, memref<?xui32, strided<[?], offset: ?>>, memref<?xui32>, memref<?xui32>)
//  CHECK-SAME:     num_requests(%{{[a-z0-9_]+}})
//  CHECK-SAME:     outs(%{{.*}}, %{{.*}} : memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?xi32, strided<[?], offset: ?>>){{$}}
// GENERIC-LABEL: sym_name = "ring_close_memref_strided"
//       GENERIC: "kpool.ring_close"
//  GENERIC-SAME:   memref<?xi32, strided<[?], offset: ?>>) -> (){{$}}
func.func @ring_close_memref_strided(
    %tail: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %ape: memref<4x128xf32, strided<[?, ?], offset: ?>>,
    %iro: memref<?xui32, strided<[?], offset: ?>>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %closed: memref<?xi32, strided<[?], offset: ?>>) {
  kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
            memref<?x128xbf16, strided<[?, ?], offset: ?>>,
            memref<?x128xbf16, strided<[?, ?], offset: ?>>,
            memref<4x128xf32, strided<[?, ?], offset: ?>>,
            memref<?xui32, strided<[?], offset: ?>>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x128xbf16, strided<[?, ?], offset: ?>>,
                              memref<?xi32, strided<[?], offset: ?>>)
  return
}

// CHECK-LABEL: func @ring_close_memref_kpool1
//       CHECK:   kpool.ring_close kpool(1) head_dim(32)
//  CHECK-SAME:     outs(%{{.*}}, %{{.*}} : memref<2x32xf32>, memref<2xi32>)
func.func @ring_close_memref_kpool1(%tail: memref<4x2x1x32xf32>,
    %k: memref<?x32xf32>, %gate: memref<?x32xf32>, %ape: memref<1x32xf32>,
    %iro: memref<3xui32>, %cache: memref<2xui32>, %slots: memref<2xui32>,
    %n: i32, %pooled: memref<2x32xf32>, %closed: memref<2xi32>) {
  kpool.ring_close kpool(1) head_dim(32)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<4x2x1x32xf32>, memref<?x32xf32>, memref<?x32xf32>,
            memref<1x32xf32>, memref<3xui32>, memref<2xui32>, memref<2xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<2x32xf32>, memref<2xi32>)
  return
}

//===----------------------------------------------------------------------===//
// kpool.pool_offsets
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func @pool_offsets_tensor_dynamic
//  CHECK-SAME: (%[[IRO:.*]]: tensor<?xui32>, %[[C:.*]]: tensor<?xui32>, %[[INIT:.*]]: tensor<?xui32>)
//       CHECK:   %[[R:.*]] = kpool.pool_offsets kpool(4)
//  CHECK-SAME:     ins(%[[IRO]], %[[C]] : tensor<?xui32>, tensor<?xui32>)
//  CHECK-SAME:     outs(%[[INIT]] : tensor<?xui32>) -> tensor<?xui32>
//       CHECK:   return %[[R]]
// GENERIC-LABEL: sym_name = "pool_offsets_tensor_dynamic"
//       GENERIC: "kpool.pool_offsets"(%{{.*}}, %{{.*}}, %{{.*}}) <{kpool = 4 : i64}> : (tensor<?xui32>, tensor<?xui32>, tensor<?xui32>) -> tensor<?xui32>
func.func @pool_offsets_tensor_dynamic(%iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %init: tensor<?xui32>) -> tensor<?xui32> {
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?xui32>) -> tensor<?xui32>
  return %pro : tensor<?xui32>
}

// CHECK-LABEL: func @pool_offsets_tensor_static_i32
//       CHECK:   kpool.pool_offsets kpool(3)
//  CHECK-SAME:     ins(%{{.*}}, %{{.*}} : tensor<5xi32>, tensor<4xi32>)
//  CHECK-SAME:     outs(%{{.*}} : tensor<5xi32>) -> tensor<5xi32>
func.func @pool_offsets_tensor_static_i32(%iro: tensor<5xi32>,
    %cache: tensor<4xi32>) -> tensor<5xi32> {
  %init = tensor.empty() : tensor<5xi32>
  %pro = kpool.pool_offsets kpool(3)
      ins(%iro, %cache : tensor<5xi32>, tensor<4xi32>)
      outs(%init : tensor<5xi32>) -> tensor<5xi32>
  return %pro : tensor<5xi32>
}

// CHECK-LABEL: func @pool_offsets_memref_strided_kpool1
//       CHECK:   kpool.pool_offsets kpool(1)
//  CHECK-SAME:     ins(%{{.*}}, %{{.*}} : memref<?xui32, strided<[?], offset: ?>>, memref<?xi32>)
//  CHECK-SAME:     outs(%{{.*}} : memref<?xui32, strided<[2], offset: 1>>){{$}}
// GENERIC-LABEL: sym_name = "pool_offsets_memref_strided_kpool1"
//       GENERIC: "kpool.pool_offsets"(%{{.*}}, %{{.*}}, %{{.*}}) <{kpool = 1 : i64}> : (memref<?xui32, strided<[?], offset: ?>>, memref<?xi32>, memref<?xui32, strided<[2], offset: 1>>) -> (){{$}}
func.func @pool_offsets_memref_strided_kpool1(
    %iro: memref<?xui32, strided<[?], offset: ?>>, %cache: memref<?xi32>,
    %pro: memref<?xui32, strided<[2], offset: 1>>) {
  kpool.pool_offsets kpool(1)
      ins(%iro, %cache : memref<?xui32, strided<[?], offset: ?>>, memref<?xi32>)
      outs(%pro : memref<?xui32, strided<[2], offset: 1>>)
  return
}
