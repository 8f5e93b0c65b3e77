// RUN: kpool-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// Overlapping operands in tensor form (docs/semantics.md, "Overlapping
// operands"): tensors are values, so one tensor may feed an input and an
// init of the same op (overlap-invalid.mlir accepts it). One-shot
// bufferization then writes the result into a copy, so the buffer-form op
// it produces never writes an operand it reads; with distinct tensors the
// init is written in place.

// CHECK-LABEL: func.func @same_tensor(
//  CHECK-SAME:   %[[T:[^:]*]]: memref
//       CHECK:   %[[A:.*]] = memref.alloc
//       CHECK:   memref.copy %[[T]], %[[A]]
//       CHECK:   kpool.compress kpool(4) head_dim(8) ins(%[[T]], %[[T]],
//  CHECK-SAME:   outs(%[[A]] :
func.func @same_tensor(%t: tensor<?x8xbf16> {bufferization.writable = true},
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %cache: tensor<?xui32>)
    -> tensor<?x8xbf16> {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%t, %t, %ape, %iro, %iro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%t : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}

// -----

// CHECK-LABEL: func.func @distinct_tensors(
//  CHECK-SAME:   %[[T:[^:]*]]: memref
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.compress
//  CHECK-SAME:   outs(%[[T]] :
func.func @distinct_tensors(%t: tensor<?x8xbf16> {bufferization.writable = true},
    %k: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>) -> tensor<?x8xbf16> {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %iro, %iro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%t : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}
