// The pool cache's bounds (docs/semantics.md, revision 3, "The pool cache,
// six details"), executed on the CPU with run-time extents the verifier
// cannot see:
//   1. a batch row at or past the block table's rows, and page_size 0:
//      nothing is stored for that request (the dense rows still are);
//   2. cache_scales with fewer pages (or rows) than cache_keys: an entry is
//      written only where both its codes and its scale are in bounds.
// (Detail 5, a cache whose rows contradict head_dim, is in
// extent-findings.mlir.) f32 keys, kpool 1 (every token is a pool),
// head_dim 4; request 0 brings tokens 0 and 1 (pools 0 and 1), request 1
// token 2 (its pool 0). Unwritten entries keep their canary: -1 for element
// entries, the code of -448 (-2 as an i8) and the scale -1 for FP8.

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

!t2 = tensor<?x?xf32>
!m = tensor<?xi32>
!bt = tensor<?x?xi32>

func.func @element(%k: !t2, %ape: !t2, %iro: !m, %pro: !m, %cache: !m,
                   %out: !t2, %bt: !bt, %ck: tensor<?x?x?xf32>)
    -> (!t2, tensor<?x?x?xf32>) {
  %p, %c = kpool.compress kpool(1) head_dim(4)
      ins(%k, %k, %ape, %iro, %pro, %cache : !t2, !t2, !t2, !m, !m, !m)
      outs(%out : !t2) to_cache(%bt, %ck : !bt, tensor<?x?x?xf32>)
      -> !t2, tensor<?x?x?xf32>
  return %p, %c : !t2, tensor<?x?x?xf32>
}

func.func @fp8(%k: !t2, %ape: !t2, %iro: !m, %pro: !m, %cache: !m, %out: !t2,
               %bt: !bt, %ck: tensor<?x?x?xf8E4M3FN>, %cs: !t2)
    -> (!t2, tensor<?x?x?xf8E4M3FN>, !t2) {
  %p, %c, %s = kpool.compress kpool(1) head_dim(4)
      ins(%k, %k, %ape, %iro, %pro, %cache : !t2, !t2, !t2, !m, !m, !m)
      outs(%out : !t2)
      to_cache(%bt, %ck, %cs : !bt, tensor<?x?x?xf8E4M3FN>, !t2)
      -> !t2, tensor<?x?x?xf8E4M3FN>, !t2
  return %p, %c, %s : !t2, tensor<?x?x?xf8E4M3FN>, !t2
}

/// Prints FP8 codes as integers.
func.func @print_codes(%c: tensor<?x?x?xf8E4M3FN>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %d0 = tensor.dim %c, %c0 : tensor<?x?x?xf8E4M3FN>
  %d1 = tensor.dim %c, %c1 : tensor<?x?x?xf8E4M3FN>
  %d2 = tensor.dim %c, %c2 : tensor<?x?x?xf8E4M3FN>
  %e = tensor.empty(%d0, %d1, %d2) : tensor<?x?x?xi32>
  %w = linalg.generic {
      indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>,
                       affine_map<(a, b, c) -> (a, b, c)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : tensor<?x?x?xf8E4M3FN>) outs(%e : tensor<?x?x?xi32>) {
  ^bb0(%x: f8E4M3FN, %y: i32):
    %b = arith.bitcast %x : f8E4M3FN to i8
    %z = arith.extsi %b : i8 to i32
    linalg.yield %z : i32
  } -> tensor<?x?x?xi32>
  %u = tensor.cast %w : tensor<?x?x?xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  return
}

func.func @print2(%v: !t2) {
  %u = tensor.cast %v : !t2 to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func @main() {
  %k3 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0],
      [9.0, 10.0, 11.0, 12.0]]> : tensor<3x4xf32>
  %k = tensor.cast %k3 : tensor<3x4xf32> to !t2
  %ape1 = arith.constant dense<0.0> : tensor<1x4xf32>
  %ape = tensor.cast %ape1 : tensor<1x4xf32> to !t2
  %iro3 = arith.constant dense<[0, 2, 3]> : tensor<3xi32>
  %iro = tensor.cast %iro3 : tensor<3xi32> to !m
  %pro3 = arith.constant dense<[0, 2, 3]> : tensor<3xi32>
  %pro = tensor.cast %pro3 : tensor<3xi32> to !m
  %cache2 = arith.constant dense<0> : tensor<2xi32>
  %cache = tensor.cast %cache2 : tensor<2xi32> to !m
  %out3 = arith.constant dense<-1.0> : tensor<3x4xf32>
  %out = tensor.cast %out3 : tensor<3x4xf32> to !t2

  // 1a. A block table with one row for two requests: request 0's pools go
  // to pages 0 and 1, request 1 (batch row 1) stores nothing; page 2 keeps
  // its canary. Every dense row is written.
  // CHECK-LABEL: table rows
  // CHECK: [1,   2,   3,   4],
  // CHECK-NEXT: [5,   6,   7,   8],
  // CHECK-NEXT: [9,   10,   11,   12]]
  // CHECK: {{\[\[\[}}1,    2,    3,    4]],
  // CHECK-NEXT: {{\[\[}}5,    6,    7,    8]],
  // CHECK-NEXT: {{\[\[}}-1,    -1,    -1,    -1]]]
  vector.print str "table rows\n"
  %bt1c = arith.constant dense<[[0, 1]]> : tensor<1x2xi32>
  %bt1 = tensor.cast %bt1c : tensor<1x2xi32> to !bt
  %ck3c = arith.constant dense<-1.0> : tensor<3x1x4xf32>
  %ck3 = tensor.cast %ck3c : tensor<3x1x4xf32> to tensor<?x?x?xf32>
  %p1, %c1 = call @element(%k, %ape, %iro, %pro, %cache, %out, %bt1, %ck3)
      : (!t2, !t2, !m, !m, !m, !t2, !bt, tensor<?x?x?xf32>)
      -> (!t2, tensor<?x?x?xf32>)
  call @print2(%p1) : (!t2) -> ()
  %c1u = tensor.cast %c1 : tensor<?x?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%c1u) : (tensor<*xf32>) -> ()

  // 1b. page_size 0: there is no entry to store (and nothing divides by
  // it); the dense rows are written.
  // CHECK-LABEL: page_size 0
  // CHECK: [1,   2,   3,   4],
  // CHECK-NEXT: [5,   6,   7,   8],
  // CHECK-NEXT: [9,   10,   11,   12]]
  vector.print str "page_size 0\n"
  %btc = arith.constant dense<[[0, 1], [1, 0]]> : tensor<2x2xi32>
  %bt = tensor.cast %btc : tensor<2x2xi32> to !bt
  %ck0c = arith.constant dense<-1.0> : tensor<2x0x4xf32>
  %ck0 = tensor.cast %ck0c : tensor<2x0x4xf32> to tensor<?x?x?xf32>
  %p2, %c2 = call @element(%k, %ape, %iro, %pro, %cache, %out, %bt, %ck0)
      : (!t2, !t2, !m, !m, !m, !t2, !bt, tensor<?x?x?xf32>)
      -> (!t2, tensor<?x?x?xf32>)
  call @print2(%p2) : (!t2) -> ()

  // 2a. FP8 codes for 3 pages, scales for 2: request 0's pool 1 goes to
  // page 2, whose scale is out of bounds, so neither its codes nor a scale
  // are written; pages 0 and 1 get both.
  // CHECK-LABEL: scales pages
  // CHECK: {{\[\[\[}}110,    118,    122,    126]],
  // CHECK-NEXT: {{\[\[}}122,    124,    125,    126]],
  // CHECK-NEXT: {{\[\[}}-2,    -2,    -2,    -2]]]
  // CHECK: {{\[\[}}0.00892857],
  // CHECK-NEXT: {{\[}}0.0267857]]
  vector.print str "scales pages\n"
  %bt2c = arith.constant dense<[[0, 2], [1, 1]]> : tensor<2x2xi32>
  %bt2 = tensor.cast %bt2c : tensor<2x2xi32> to !bt
  %codes3c = arith.constant dense<-448.0> : tensor<3x1x4xf8E4M3FN>
  %codes3 = tensor.cast %codes3c : tensor<3x1x4xf8E4M3FN> to tensor<?x?x?xf8E4M3FN>
  %sc2c = arith.constant dense<-1.0> : tensor<2x1xf32>
  %sc2 = tensor.cast %sc2c : tensor<2x1xf32> to !t2
  %p3, %c3, %s3 = call @fp8(%k, %ape, %iro, %pro, %cache, %out, %bt2,
      %codes3, %sc2)
      : (!t2, !t2, !m, !m, !m, !t2, !bt, tensor<?x?x?xf8E4M3FN>, !t2)
      -> (!t2, tensor<?x?x?xf8E4M3FN>, !t2)
  call @print_codes(%c3) : (tensor<?x?x?xf8E4M3FN>) -> ()
  call @print2(%s3) : (!t2) -> ()

  // 2b. Pages of 2 rows, scales with 1 row per page: request 0's pool 1
  // (page 0, row 1) has no scale, so neither is written; request 1's pool
  // 0 goes to page 1, row 0.
  // CHECK-LABEL: scales rows
  // CHECK: {{\[\[\[}}110,    118,    122,    126],
  // CHECK-NEXT: {{\[}}-2,    -2,    -2,    -2]],
  // CHECK-NEXT: {{\[\[}}122,    124,    125,    126],
  // CHECK-NEXT: {{\[}}-2,    -2,    -2,    -2]]]
  // CHECK: {{\[\[}}0.00892857],
  // CHECK-NEXT: {{\[}}0.0267857]]
  vector.print str "scales rows\n"
  %codes22c = arith.constant dense<-448.0> : tensor<2x2x4xf8E4M3FN>
  %codes22 = tensor.cast %codes22c : tensor<2x2x4xf8E4M3FN> to tensor<?x?x?xf8E4M3FN>
  %p4, %c4, %s4 = call @fp8(%k, %ape, %iro, %pro, %cache, %out, %bt,
      %codes22, %sc2)
      : (!t2, !t2, !m, !m, !m, !t2, !bt, tensor<?x?x?xf8E4M3FN>, !t2)
      -> (!t2, tensor<?x?x?xf8E4M3FN>, !t2)
  call @print_codes(%c4) : (tensor<?x?x?xf8E4M3FN>) -> ()
  call @print2(%s4) : (!t2) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
