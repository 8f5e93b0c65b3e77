// Run-time extents that contradict the op (docs/semantics.md, revision 3,
// "Extents that contradict the op at run time"): the kernels write nothing
// but the outputs' defined values for a call that produces no pool
// (closed_pool = -1 and zero rows of ring_close and the step, zero
// pool_row_offsets) and record the Extent finding (11) naming the operand
// and dimension: ((operand id << 4 | dim) << 8) | 11
// (kpool/ABI/StatusWord.h), the id being the operand's place among the
// distinct operand names of kpool/ABI/KernelABI.def (pooled 0, k 1, gate 2,
// ape 3, input_row_offsets 4, pool_row_offsets 5, tail 9, closed 13,
// cache_keys 14: python/tests/test_extent_findings.py computes them from
// the table). f32, kpool 2, head_dim 4; every operand of the functions
// below has dynamic extents. Before the Extent finding, each call left its
// outputs alone (or wrote -1) and the status word at 0.

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s
// The same words from the decoder the runtime and Python use:
// RUN: %if python-numpy %{ env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=%kpool_src_root/python KPOOL_CAPI_LIB=%kpool_capi_lib %kpool_python -c "import kpool; [print(kpool.status_error(w)) for w in (4363, 12299, 16395, 37131, 37387, 20491, 53259, 57867, 8203)]" | FileCheck %s --check-prefix=DECODE %}

// DECODE: 'k' dimension 1 contradicts the op (the other operands' extents) or the kernels' configuration (head_dim, kpool) (found by the kernels or their entry point; status word 0x110b)
// DECODE: 'ape' dimension 0 contradicts
// DECODE: 'input_row_offsets' dimension 0 contradicts
// DECODE: 'tail' dimension 1 contradicts
// DECODE: 'tail' dimension 2 contradicts
// DECODE: 'pool_row_offsets' dimension 0 contradicts
// DECODE: 'closed' dimension 0 contradicts
// DECODE: 'cache_keys' dimension 2 contradicts
// DECODE: 'gate' dimension 0 contradicts

!t2 = tensor<?x?xf32>
!t4 = tensor<?x?x?x?xf32>
!m = tensor<?xi32>
!st = tensor<1xi64>

func.func @compress(%k: !t2, %gate: !t2, %ape: !t2, %iro: !m, %pro: !m,
                    %cache: !m, %out: !t2, %st: !st) -> (!t2, !st) {
  %p, %s = kpool.compress kpool(2) head_dim(4)
      ins(%k, %gate, %ape, %iro, %pro, %cache : !t2, !t2, !t2, !m, !m, !m)
      outs(%out : !t2) status(%st : !st) -> !t2, !st
  return %p, %s : !t2, !st
}

func.func @compress_cache(%k: !t2, %ape: !t2, %iro: !m, %pro: !m, %cache: !m,
                          %out: !t2, %bt: tensor<?x?xi32>, %ck: tensor<?x?x?xf32>,
                          %st: !st) -> (!t2, tensor<?x?x?xf32>, !st) {
  %p, %c, %s = kpool.compress kpool(2) head_dim(4)
      ins(%k, %k, %ape, %iro, %pro, %cache : !t2, !t2, !t2, !m, !m, !m)
      outs(%out : !t2) to_cache(%bt, %ck : tensor<?x?xi32>, tensor<?x?x?xf32>)
      status(%st : !st) -> !t2, tensor<?x?x?xf32>, !st
  return %p, %c, %s : !t2, tensor<?x?x?xf32>, !st
}

func.func @ring_close(%tail: !t4, %k: !t2, %ape: !t2, %iro: !m, %cache: !m,
                      %slots: !m, %n: i32, %pooled: !t2, %closed: !m,
                      %st: !st) -> (!t2, !m, !st) {
  %p, %c, %s = kpool.ring_close kpool(2) head_dim(4)
      ins(%tail, %k, %k, %ape, %iro, %cache, %slots
          : !t4, !t2, !t2, !t2, !m, !m, !m)
      num_requests(%n) outs(%pooled, %closed : !t2, !m) status(%st : !st)
      -> !t2, !m, !st
  return %p, %c, %s : !t2, !m, !st
}

func.func @seed_tail(%tail: !t4, %k: !t2, %iro: !m, %cache: !m, %slots: !m,
                     %n: i32, %st: !st) -> (!t4, !st) {
  %r, %s = kpool.seed_tail kpool(2) head_dim(4)
      ins(%k, %k, %iro, %cache, %slots : !t2, !t2, !m, !m, !m)
      num_requests(%n) outs(%tail : !t4) status(%st : !st) -> !t4, !st
  return %r, %s : !t4, !st
}

func.func @pool_offsets(%iro: !m, %cache: !m, %pro: !m, %st: !st)
    -> (!m, !st) {
  %r, %s = kpool.pool_offsets kpool(2) ins(%iro, %cache : !m, !m)
      outs(%pro : !m) status(%st : !st) -> !m, !st
  return %r, %s : !m, !st
}

func.func @step(%k: !t2, %ape: !t2, %iro: !m, %cache: !m, %slots: !m,
                %n: i32, %closed: !t2, %ids: !m, %pro: !m, %pooled: !t2,
                %tail: !t4, %st: !st) -> (!t2, !m, !m, !t2, !t4, !st) {
  %c, %i, %o, %p, %t, %s = kpool.step kpool(2) head_dim(4)
      ins(%k, %k, %ape, %iro, %cache, %slots : !t2, !t2, !t2, !m, !m, !m)
      num_requests(%n)
      outs(%closed, %ids, %pro, %pooled, %tail : !t2, !m, !m, !t2, !t4)
      status(%st : !st) -> !t2, !m, !m, !t2, !t4, !st
  return %c, %i, %o, %p, %t, %s : !t2, !m, !m, !t2, !t4, !st
}

func.func @print2(%v: !t2) {
  %u = tensor.cast %v : !t2 to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
func.func @printm(%v: !m) {
  %u = tensor.cast %v : !m to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  return
}
func.func @printst(%v: !st) {
  %u = tensor.cast %v : !st to tensor<*xi64>
  call @printMemrefI64(%u) : (tensor<*xi64>) -> ()
  return
}

func.func @main() {
  %zero = arith.constant dense<0> : tensor<1xi64>
  %st = tensor.cast %zero : tensor<1xi64> to !st
  // Six rows of keys (two requests of three tokens, no cache), and the
  // same 8 wide, 5 rows long.
  %k6 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0],
      [5.0, 6.0, 7.0, 8.0], [7.0, 8.0, 9.0, 10.0], [9.0, 10.0, 11.0, 12.0],
      [11.0, 12.0, 13.0, 14.0]]> : tensor<6x4xf32>
  %k = tensor.cast %k6 : tensor<6x4xf32> to !t2
  %k8c = arith.constant dense<1.0> : tensor<6x8xf32>
  %k8 = tensor.cast %k8c : tensor<6x8xf32> to !t2
  %k5c = arith.constant dense<1.0> : tensor<5x4xf32>
  %k5 = tensor.cast %k5c : tensor<5x4xf32> to !t2
  %ape2c = arith.constant dense<0.0> : tensor<2x4xf32>
  %ape = tensor.cast %ape2c : tensor<2x4xf32> to !t2
  %ape3c = arith.constant dense<0.0> : tensor<3x4xf32>
  %ape3 = tensor.cast %ape3c : tensor<3x4xf32> to !t2
  %iroc = arith.constant dense<[0, 3, 6]> : tensor<3xi32>
  %iro = tensor.cast %iroc : tensor<3xi32> to !m
  %iro4c = arith.constant dense<[0, 3, 6, 6]> : tensor<4xi32>
  %iro4 = tensor.cast %iro4c : tensor<4xi32> to !m
  %cachec = arith.constant dense<[0, 0]> : tensor<2xi32>
  %cache = tensor.cast %cachec : tensor<2xi32> to !m
  %proc = arith.constant dense<[0, 1, 2]> : tensor<3xi32>
  %pro = tensor.cast %proc : tensor<3xi32> to !m
  %outc = arith.constant dense<-1.0> : tensor<2x4xf32>
  %out = tensor.cast %outc : tensor<2x4xf32> to !t2

  // A valid call through the same dynamic types: pools of rows (0, 1) and
  // (3, 4) (the keys are the gates, ape 0), status 0.
  // CHECK-LABEL: valid compress
  // CHECK: [2.76159,   3.76159,   4.76159,   5.76159],
  // CHECK-NEXT: [8.76159,   9.76159,   10.7616,   11.7616]]
  // CHECK: [0]
  vector.print str "valid compress\n"
  %p0, %s0 = call @compress(%k, %k, %ape, %iro, %pro, %cache, %out, %st)
      : (!t2, !t2, !t2, !m, !m, !m, !t2, !st) -> (!t2, !st)
  call @print2(%p0) : (!t2) -> ()
  call @printst(%s0) : (!st) -> ()

  // Keys 8 wide under head_dim(4): nothing written, 'k' dimension 1.
  // CHECK-LABEL: compress k
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK-NEXT: [-1,   -1,   -1,   -1]]
  // CHECK: [4363]
  vector.print str "compress k\n"
  %p1, %s1 = call @compress(%k8, %k8, %ape, %iro, %pro, %cache, %out, %st)
      : (!t2, !t2, !t2, !m, !m, !m, !t2, !st) -> (!t2, !st)
  call @print2(%p1) : (!t2) -> ()
  call @printst(%s1) : (!st) -> ()

  // gate with 5 rows against k's 6.
  // CHECK-LABEL: compress gate rows
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK: [8203]
  vector.print str "compress gate rows\n"
  %p9, %s9 = call @compress(%k, %k5, %ape, %iro, %pro, %cache, %out, %st)
      : (!t2, !t2, !t2, !m, !m, !m, !t2, !st) -> (!t2, !st)
  call @print2(%p9) : (!t2) -> ()
  call @printst(%s9) : (!st) -> ()

  // ape [3, 4] under kpool(2).
  // CHECK-LABEL: compress ape
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK: [12299]
  vector.print str "compress ape\n"
  %p2, %s2 = call @compress(%k, %k, %ape3, %iro, %pro, %cache, %out, %st)
      : (!t2, !t2, !t2, !m, !m, !m, !t2, !st) -> (!t2, !st)
  call @print2(%p2) : (!t2) -> ()
  call @printst(%s2) : (!st) -> ()

  // input_row_offsets with 4 entries for 2 requests.
  // CHECK-LABEL: compress offsets
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK: [16395]
  vector.print str "compress offsets\n"
  %p3, %s3 = call @compress(%k, %k, %ape, %iro4, %pro, %cache, %out, %st)
      : (!t2, !t2, !t2, !m, !m, !m, !t2, !st) -> (!t2, !st)
  call @print2(%p3) : (!t2) -> ()
  call @printst(%s3) : (!st) -> ()

  // A cache whose rows are 8 wide (detail 5 of the pool cache): no entry
  // and no dense row is written; one 4 wide gets both pools, and a cache
  // of page_size 0 nothing (detail 1).
  %btc = arith.constant dense<[[0], [1]]> : tensor<2x1xi32>
  %bt = tensor.cast %btc : tensor<2x1xi32> to tensor<?x?xi32>
  %ck8c = arith.constant dense<-1.0> : tensor<2x1x8xf32>
  %ck8 = tensor.cast %ck8c : tensor<2x1x8xf32> to tensor<?x?x?xf32>
  // CHECK-LABEL: compress cache_keys
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK: [57867]
  vector.print str "compress cache_keys\n"
  %p4, %c4, %s4 = call @compress_cache(%k, %ape, %iro, %pro, %cache, %out,
      %bt, %ck8, %st)
      : (!t2, !t2, !m, !m, !m, !t2, tensor<?x?xi32>, tensor<?x?x?xf32>, !st)
      -> (!t2, tensor<?x?x?xf32>, !st)
  call @print2(%p4) : (!t2) -> ()
  %c4u = tensor.cast %c4 : tensor<?x?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%c4u) : (tensor<*xf32>) -> ()
  call @printst(%s4) : (!st) -> ()

  // ring_close with a tail whose second extent is 3: -1 and zero rows.
  %tail3c = arith.constant dense<7.0> : tensor<2x3x2x4xf32>
  %tail3 = tensor.cast %tail3c : tensor<2x3x2x4xf32> to !t4
  %slotsc = arith.constant dense<[0, 1]> : tensor<2xi32>
  %slots = tensor.cast %slotsc : tensor<2xi32> to !m
  %n = arith.constant 2 : i32
  %idsc = arith.constant dense<5> : tensor<2xi32>
  %ids = tensor.cast %idsc : tensor<2xi32> to !m
  // CHECK-LABEL: ring_close tail
  // CHECK: [0,   0,   0,   0],
  // CHECK-NEXT: [0,   0,   0,   0]]
  // CHECK: [-1,  -1]
  // CHECK: [37131]
  vector.print str "ring_close tail\n"
  %rp, %rc, %rs = call @ring_close(%tail3, %k, %ape, %iro, %cache, %slots,
      %n, %out, %ids, %st)
      : (!t4, !t2, !t2, !m, !m, !m, i32, !t2, !m, !st) -> (!t2, !m, !st)
  call @print2(%rp) : (!t2) -> ()
  call @printm(%rc) : (!m) -> ()
  call @printst(%rs) : (!st) -> ()

  // seed_tail with a ring window of 1 under kpool(2): the tail unchanged.
  %tail1c = arith.constant dense<7.0> : tensor<2x2x1x4xf32>
  %tail1 = tensor.cast %tail1c : tensor<2x2x1x4xf32> to !t4
  // CHECK-LABEL: seed_tail window
  // CHECK-NOT: [1,
  // CHECK: [37387]
  vector.print str "seed_tail window\n"
  %tt, %ts = call @seed_tail(%tail1, %k, %iro, %cache, %slots, %n, %st)
      : (!t4, !t2, !m, !m, !m, i32, !st) -> (!t4, !st)
  %ttu = tensor.cast %tt : !t4 to tensor<*xf32>
  call @printMemrefF32(%ttu) : (tensor<*xf32>) -> ()
  call @printst(%ts) : (!st) -> ()

  // pool_offsets writing 4 offsets for 2 requests: the offsets of no pools.
  %pro4c = arith.constant dense<9> : tensor<4xi32>
  %pro4 = tensor.cast %pro4c : tensor<4xi32> to !m
  // CHECK-LABEL: pool_offsets
  // CHECK: [0,  0,  0,  0]
  // CHECK: [20491]
  vector.print str "pool_offsets\n"
  %oo, %os = call @pool_offsets(%iro, %cache, %pro4, %st)
      : (!m, !m, !m, !st) -> (!m, !st)
  call @printm(%oo) : (!m) -> ()
  call @printst(%os) : (!st) -> ()

  // The step with 3 closed rows for 2 requests: closed_pool -1, zero
  // closed rows and zero offsets, nothing else.
  %closed3c = arith.constant dense<5.0> : tensor<3x4xf32>
  %closed3 = tensor.cast %closed3c : tensor<3x4xf32> to !t2
  %tail2c = arith.constant dense<7.0> : tensor<2x2x2x4xf32>
  %tail2 = tensor.cast %tail2c : tensor<2x2x2x4xf32> to !t4
  %spro = tensor.cast %proc : tensor<3xi32> to !m
  // CHECK-LABEL: step closed
  // CHECK: [0,   0,   0,   0],
  // CHECK-NEXT: [0,   0,   0,   0],
  // CHECK-NEXT: [0,   0,   0,   0]]
  // CHECK: [-1,  -1]
  // CHECK: [0,  0,  0]
  // CHECK: [-1,   -1,   -1,   -1],
  // CHECK: [53259]
  vector.print str "step closed\n"
  %c5, %i5, %o5, %p5, %t5, %s5 = call @step(%k, %ape, %iro, %cache, %slots,
      %n, %closed3, %ids, %spro, %out, %tail2, %st)
      : (!t2, !t2, !m, !m, !m, i32, !t2, !m, !m, !t2, !t4, !st)
      -> (!t2, !m, !m, !t2, !t4, !st)
  call @print2(%c5) : (!t2) -> ()
  call @printm(%i5) : (!m) -> ()
  call @printm(%o5) : (!m) -> ()
  call @print2(%p5) : (!t2) -> ()
  call @printst(%s5) : (!st) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefI64(tensor<*xi64>)
