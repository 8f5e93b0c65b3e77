// Bad metadata reads and writes nothing outside the operands and nothing
// outside a request's own rows (docs/semantics.md, "Bad input"). f32,
// kpool 2, head_dim 2, equal gates and zero ape so pools are plain means.

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

func.func @main() {
  %k = arith.constant dense<[[1.0, 1.0], [3.0, 3.0], [5.0, 5.0], [7.0, 7.0], [9.0, 9.0], [11.0, 11.0]]> : tensor<6x2xf32>
  %g = arith.constant dense<0.0> : tensor<6x2xf32>
  %ape = arith.constant dense<0.0> : tensor<2x2xf32>

  // compress: request 0 is fine (rows 0-3, pools -> rows 0, 1); request 1
  // has reversed offsets and brings nothing (its claimed row 2 keeps -1);
  // request 2 (rows 2-5) owns rows 3 and 4 but `pooled` has only 4 rows, so
  // only its first pool is written; request 3 reaches past k's 6 rows.
  %iro = arith.constant dense<[0, 4, 2, 6, 100]> : tensor<5xi32>
  %cache = arith.constant dense<0> : tensor<4xi32>
  %pro = arith.constant dense<[0, 2, 3, 5, 6]> : tensor<5xi32>
  %init = arith.constant dense<-1.0> : tensor<4x2xf32>
  %pooled = kpool.compress kpool(2) head_dim(2)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : tensor<6x2xf32>, tensor<6x2xf32>, tensor<2x2xf32>,
            tensor<5xi32>, tensor<5xi32>, tensor<4xi32>)
      outs(%init : tensor<4x2xf32>) -> tensor<4x2xf32>
  // CHECK: compress
  // CHECK: sizes = [4, 2]
  // CHECK-NEXT: [2,   2],
  // CHECK-NEXT: [6,   6],
  // CHECK-NEXT: [-1,   -1],
  // CHECK-NEXT: [6,   6]]
  vector.print str "compress\n"
  %u = tensor.cast %pooled : tensor<4x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()

  // seed_tail: request 0's slot 5 is outside the 2-slot ring (nothing
  // written), request 1 parks its one token (row 1) in slot 1, member 0;
  // num_requests = 7 is clamped to the batch of 2.
  %iro2 = arith.constant dense<[0, 1, 2]> : tensor<3xi32>
  %cache2 = arith.constant dense<0> : tensor<2xi32>
  %slots = arith.constant dense<[5, 1]> : tensor<2xi32>
  %seven = arith.constant 7 : i32
  %ring0 = arith.constant dense<-1.0> : tensor<2x2x2x2xf32>
  %ring = kpool.seed_tail kpool(2) head_dim(2)
      ins(%k, %g, %iro2, %cache2, %slots
          : tensor<6x2xf32>, tensor<6x2xf32>, tensor<3xi32>, tensor<2xi32>,
            tensor<2xi32>)
      num_requests(%seven) outs(%ring0 : tensor<2x2x2x2xf32>) -> tensor<2x2x2x2xf32>

  // ring_close: both requests hold one member (cache 1) and bring one token;
  // request 0's slot is out of range (closes nothing), request 1 closes
  // pool 0 from ring member (3, gate 0) and row 1 (3): mean 3. With
  // num_requests = -1 (clamped to 0) nothing closes.
  %cache3 = arith.constant dense<1> : tensor<2xi32>
  %n2 = arith.constant 2 : i32
  %pinit = arith.constant dense<5.0> : tensor<2x2xf32>
  %cinit = arith.constant dense<5> : tensor<2xi32>
  %p, %c = kpool.ring_close kpool(2) head_dim(2)
      ins(%ring, %k, %g, %ape, %iro2, %cache3, %slots
          : tensor<2x2x2x2xf32>, tensor<6x2xf32>, tensor<6x2xf32>,
            tensor<2x2xf32>, tensor<3xi32>, tensor<2xi32>, tensor<2xi32>)
      num_requests(%n2) outs(%pinit, %cinit : tensor<2x2xf32>, tensor<2xi32>)
      -> tensor<2x2xf32>, tensor<2xi32>
  // CHECK: ring_close
  // CHECK: sizes = [2, 2]
  // CHECK-NEXT: [0,   0],
  // CHECK-NEXT: [3,   3]]
  // CHECK: [-1,  0]
  vector.print str "ring_close\n"
  %pu = tensor.cast %p : tensor<2x2xf32> to tensor<*xf32>
  call @printMemrefF32(%pu) : (tensor<*xf32>) -> ()
  %cu = tensor.cast %c : tensor<2xi32> to tensor<*xi32>
  call @printMemrefI32(%cu) : (tensor<*xi32>) -> ()

  %minus1 = arith.constant -1 : i32
  %p2, %c2 = kpool.ring_close kpool(2) head_dim(2)
      ins(%ring, %k, %g, %ape, %iro2, %cache3, %slots
          : tensor<2x2x2x2xf32>, tensor<6x2xf32>, tensor<6x2xf32>,
            tensor<2x2xf32>, tensor<3xi32>, tensor<2xi32>, tensor<2xi32>)
      num_requests(%minus1) outs(%pinit, %cinit : tensor<2x2xf32>, tensor<2xi32>)
      -> tensor<2x2xf32>, tensor<2xi32>
  // CHECK: num_requests -1
  // CHECK: [-1,  -1]
  vector.print str "num_requests -1\n"
  %cu2 = tensor.cast %c2 : tensor<2xi32> to tensor<*xi32>
  call @printMemrefI32(%cu2) : (tensor<*xi32>) -> ()
  // The ring, printed last: ring_close above only read it.
  // CHECK: seed_tail
  // CHECK: sizes = [2, 2, 2, 2]
  // CHECK-NEXT: {{\[\[\[}}[-1,    -1],
  // CHECK-NEXT: [-1,    -1]],
  // CHECK-NEXT: {{\[}}[-1,    -1],
  // CHECK-NEXT: [-1,    -1]]],
  // CHECK-NEXT: {{\[\[}}[3,    3],
  // CHECK-NEXT: [-1,    -1]],
  // CHECK-NEXT: {{\[}}[0,    0],
  // CHECK-NEXT: [-1,    -1]]]]
  vector.print str "seed_tail\n"
  %r = tensor.cast %ring : tensor<2x2x2x2xf32> to tensor<*xf32>
  call @printMemrefF32(%r) : (tensor<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
