// The pools of one ragged batch (kpool 4, head_dim 128, bf16), computed
// several ways on one backend, must be bit-identical (spec case 1):
//   F (full):    one call with every token; compress builds every pool;
//   C (chunked): call C1 then call C2, the chunk boundaries inside pools, so
//                ring_close closes the straddling pools from the tail ring
//                that seed_tail filled in C1;
//   M, S:        the full call again on views that take the other code paths
//                of the GPU mapping: k, gate and pooled at a 2-byte offset
//                (the alignment check rejects vector accesses: scalar lane
//                loop) and k, gate with channel stride 2 (the kernels for
//                non-unit innermost strides).
// Requests: 11 and 9 tokens; C1 brings 5 and 3, C2 the remaining 6 and 6.
// Ring slots are 2 and 0 of 3 (neither the batch row nor dense); ape and the
// gates are large enough that the softmax discriminates.
//
// `main` needs the transfer helpers of Inputs/device-gpu.mlir (device memory)
// or Inputs/device-host.mlir (host memory, CPU pipeline):
//   @to_device_bf16/@to_device_f32/@to_device_i32(host) -> copy
//   @to_host_bf16/@to_host_i32(copy, host)
// It prints `mismatch <what>: <count>` lines (0 expected), the closed pool
// ids and the pool offsets, then the full call's pooled rows as f32. The
// CHECK lines below are what every lowering of it must print.

// CHECK:      mismatch chunked compress vs full: 0
// CHECK-NEXT: mismatch ring_close vs full: 0
// CHECK-NEXT: mismatch ring chunked vs full: 0
// CHECK-NEXT: ring row left zero: 0
// CHECK-NEXT: mismatch misaligned vs full: 0
// CHECK-NEXT: mismatch strided vs full: 0
// CHECK-NEXT: mismatch unclosed rows vs zero: 0
// CHECK-NEXT: pool values not zero: 512
// CHECK-NEXT: closed F: -1, -1,
// CHECK-NEXT: closed C1: -1, -1,
// CHECK-NEXT: closed C2: 1, 0,
// CHECK-NEXT: closed M S: -1, -1,
// CHECK-NEXT: -1, -1,
// CHECK-NEXT: offsets F: 0, 2, 4,
// CHECK-NEXT: offsets C1: 0, 1, 1,
// CHECK-NEXT: offsets C2: 0, 0, 1,
// CHECK-NEXT: offsets M S: 0, 2, 4,
// CHECK-NEXT: 0, 2, 4,
// CHECK-NEXT: pools F:
// CHECK-NEXT: rank = 2 offset = 0 sizes = [4, 128] strides = [128, 1]

!kv = memref<?x128xbf16, strided<[?, ?], offset: ?>>
!ring = memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
!ape = memref<4x128xf32, strided<[?, ?], offset: ?>>
!meta = memref<?xi32, strided<[?], offset: ?>>

// One call: the four ops in the order the spec fixes.
func.func @step(%tail: !ring, %k: !kv, %g: !kv, %ape: !ape, %iro: !meta,
                %cache: !meta, %slots: !meta, %n: i32, %pro: !meta,
                %pooled: !kv, %rpooled: !kv, %closed: !meta) {
  kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, !ape, !meta, !meta, !meta)
      num_requests(%n) outs(%rpooled, %closed : !kv, !meta)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, !ape, !meta, !meta, !meta)
      outs(%pooled : !kv)
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %g, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  return
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

func.func private @printMemrefF32(memref<*xf32>)

memref.global "private" constant @iro_f : memref<3xi32> = dense<[0, 11, 20]>
memref.global "private" constant @cache_f : memref<2xi32> = dense<[0, 0]>
memref.global "private" constant @iro_c1 : memref<3xi32> = dense<[0, 5, 8]>
memref.global "private" constant @cache_c1 : memref<2xi32> = dense<[0, 0]>
memref.global "private" constant @iro_c2 : memref<3xi32> = dense<[0, 6, 12]>
memref.global "private" constant @cache_c2 : memref<2xi32> = dense<[5, 3]>
memref.global "private" constant @slots : memref<2xi32> = dense<[2, 0]>

// Key and gate rows of one call's tokens: row iro[b] + i holds position
// cache[b] + i of request b. Values depend on (b, position, channel) only,
// so every chunking sees the same tokens.
func.func @fill(%k: !kv, %g: !kv, %iro: memref<?xi32>, %cache: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c7 = arith.constant 7 : index
  %c17 = arith.constant 17 : index
  %c20 = arith.constant 20 : index
  %c29 = arith.constant 29 : index
  %c30 = arith.constant 30 : index
  %c41 = arith.constant 41 : index
  %c53 = arith.constant 53 : index
  %c61 = arith.constant 61 : index
  %c128 = arith.constant 128 : index
  %c131 = arith.constant 131 : index
  %eighth = arith.constant 0.125 : f32
  %half = arith.constant 0.5 : f32
  %batch = memref.dim %cache, %c0 : memref<?xi32>
  scf.for %b = %c0 to %batch step %c1 {
    %b1 = arith.addi %b, %c1 : index
    %s32 = memref.load %iro[%b] : memref<?xi32>
    %e32 = memref.load %iro[%b1] : memref<?xi32>
    %q32 = memref.load %cache[%b] : memref<?xi32>
    %s = arith.index_cast %s32 : i32 to index
    %e = arith.index_cast %e32 : i32 to index
    %q = arith.index_cast %q32 : i32 to index
    %n = arith.subi %e, %s : index
    scf.for %i = %c0 to %n step %c1 {
      %row = arith.addi %s, %i : index
      %pos = arith.addi %q, %i : index
      scf.for %d = %c0 to %c128 step %c1 {
        // key = ((131 b + 29 pos + 7 d) mod 61 - 30) / 8
        %kb = arith.muli %b, %c131 : index
        %kp = arith.muli %pos, %c29 : index
        %kd = arith.muli %d, %c7 : index
        %ks = arith.addi %kb, %kp : index
        %ks2 = arith.addi %ks, %kd : index
        %kh = arith.remui %ks2, %c61 : index
        %kc = arith.subi %kh, %c30 : index
        %ki = arith.index_cast %kc : index to i32
        %kf = arith.sitofp %ki : i32 to f32
        %kv = arith.mulf %kf, %eighth : f32
        %kt = arith.truncf %kv : f32 to bf16
        memref.store %kt, %k[%row, %d] : !kv
        // gate = ((17 b + 53 pos + 3 d) mod 41 - 20) / 2
        %gb = arith.muli %b, %c17 : index
        %gp = arith.muli %pos, %c53 : index
        %gd = arith.muli %d, %c3 : index
        %gs = arith.addi %gb, %gp : index
        %gs2 = arith.addi %gs, %gd : index
        %gh = arith.remui %gs2, %c41 : index
        %gc = arith.subi %gh, %c20 : index
        %gi = arith.index_cast %gc : index to i32
        %gf = arith.sitofp %gi : i32 to f32
        %gv = arith.mulf %gf, %half : f32
        %gt = arith.truncf %gv : f32 to bf16
        memref.store %gt, %g[%row, %d] : !kv
      }
    }
  }
  return
}

// ape[m][d] = (((5 m + d) mod 9) - 4) * 0.75: non-zero, position-dependent.
func.func @fill_ape(%ape: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c9 = arith.constant 9 : index
  %c128 = arith.constant 128 : index
  %scale = arith.constant 0.75 : f32
  scf.for %m = %c0 to %c4 step %c1 {
    scf.for %d = %c0 to %c128 step %c1 {
      %a = arith.muli %m, %c5 : index
      %b = arith.addi %a, %d : index
      %r = arith.remui %b, %c9 : index
      %s = arith.subi %r, %c4 : index
      %i = arith.index_cast %s : index to i32
      %f = arith.sitofp %i : i32 to f32
      %v = arith.mulf %f, %scale : f32
      memref.store %v, %ape[%m, %d] : memref<?x?xf32>
    }
  }
  return
}

// Host buffer of `rows` x `cols` bf16 zeros.
func.func @zeros(%rows: index, %cols: index) -> memref<?x?xbf16> {
  %z = arith.constant 0.0 : bf16
  %m = memref.alloc(%rows, %cols) : memref<?x?xbf16>
  linalg.fill ins(%z : bf16) outs(%m : memref<?x?xbf16>)
  return %m : memref<?x?xbf16>
}

// The [rows, 128] view at column `col0` with channel stride `step`.
func.func @view(%m: memref<?x?xbf16>, %col0: index, %step: index) -> !kv {
  %c0 = arith.constant 0 : index
  %rows = memref.dim %m, %c0 : memref<?x?xbf16>
  %v = memref.subview %m[0, %col0] [%rows, 128] [1, %step]
      : memref<?x?xbf16> to !kv
  return %v : !kv
}

// A [24, 128] buffer seen as the ring [3, 2, 4, 128].
func.func @ring(%m: memref<?x?xbf16>) -> !ring {
  %s = memref.cast %m : memref<?x?xbf16> to memref<24x128xbf16>
  %r = memref.expand_shape %s [[0, 1, 2], [3]] output_shape [3, 2, 4, 128]
      : memref<24x128xbf16> into memref<3x2x4x128xbf16>
  %d = memref.cast %r : memref<3x2x4x128xbf16> to !ring
  return %d : !ring
}

func.func @meta(%m: memref<?xi32>) -> !meta {
  %d = memref.cast %m : memref<?xi32> to !meta
  return %d : !meta
}

// Bits that differ between rows [ra, ra + n) of `a` and [rb, rb + n) of `b`.
func.func @mismatch(%a: !kv, %ra: index, %b: !kv, %rb: index, %n: index)
    -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (index) {
    %ia = arith.addi %ra, %i : index
    %ib = arith.addi %rb, %i : index
    %s = scf.for %d = %c0 to %c128 step %c1 iter_args(%acc2 = %acc)
        -> (index) {
      %x = memref.load %a[%ia, %d] : !kv
      %y = memref.load %b[%ib, %d] : !kv
      %xi = arith.bitcast %x : bf16 to i16
      %yi = arith.bitcast %y : bf16 to i16
      %ne = arith.cmpi ne, %xi, %yi : i16
      %one = arith.select %ne, %c1, %c0 : index
      %next = arith.addi %acc2, %one : index
      scf.yield %next : index
    }
    scf.yield %s : index
  }
  return %r : index
}

func.func @print_ids(%m: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %m, %c0 : memref<?xi32>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %m[%i] : memref<?xi32>
    vector.print %v : i32 punctuation <comma>
  }
  vector.print punctuation <newline>
  return
}

// A call's device buffers, made from host buffers; results come back into
// the same host buffers.
func.func @call(%tailH: memref<?x?xbf16>, %kH: memref<?x?xbf16>,
                %gH: memref<?x?xbf16>, %col0: index, %step: index,
                %apeD: !ape, %iroG: memref<3xi32>, %cacheG: memref<2xi32>,
                %proH: memref<?xi32>, %pooledH: memref<?x?xbf16>,
                %pcol0: index, %rpooledH: memref<?x?xbf16>,
                %closedH: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 2 : i32
  %iroH = memref.cast %iroG : memref<3xi32> to memref<?xi32>
  %cacheH = memref.cast %cacheG : memref<2xi32> to memref<?xi32>
  %slotsG = memref.get_global @slots : memref<2xi32>
  %slotsH = memref.cast %slotsG : memref<2xi32> to memref<?xi32>
  %tailD = call @to_device_bf16(%tailH) : (memref<?x?xbf16>) -> memref<?x?xbf16>
  %kD = call @to_device_bf16(%kH) : (memref<?x?xbf16>) -> memref<?x?xbf16>
  %gD = call @to_device_bf16(%gH) : (memref<?x?xbf16>) -> memref<?x?xbf16>
  %iroD = call @to_device_i32(%iroH) : (memref<?xi32>) -> memref<?xi32>
  %cacheD = call @to_device_i32(%cacheH) : (memref<?xi32>) -> memref<?xi32>
  %slotsD = call @to_device_i32(%slotsH) : (memref<?xi32>) -> memref<?xi32>
  %proD = call @to_device_i32(%proH) : (memref<?xi32>) -> memref<?xi32>
  %pooledD = call @to_device_bf16(%pooledH) : (memref<?x?xbf16>) -> memref<?x?xbf16>
  %rpooledD = call @to_device_bf16(%rpooledH) : (memref<?x?xbf16>) -> memref<?x?xbf16>
  %closedD = call @to_device_i32(%closedH) : (memref<?xi32>) -> memref<?xi32>
  %tail = call @ring(%tailD) : (memref<?x?xbf16>) -> !ring
  %k = call @view(%kD, %col0, %step) : (memref<?x?xbf16>, index, index) -> !kv
  %g = call @view(%gD, %col0, %step) : (memref<?x?xbf16>, index, index) -> !kv
  %iro = call @meta(%iroD) : (memref<?xi32>) -> !meta
  %cache = call @meta(%cacheD) : (memref<?xi32>) -> !meta
  %slots = call @meta(%slotsD) : (memref<?xi32>) -> !meta
  %pro = call @meta(%proD) : (memref<?xi32>) -> !meta
  %pooled = call @view(%pooledD, %pcol0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %rpooled = call @view(%rpooledD, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %closed = call @meta(%closedD) : (memref<?xi32>) -> !meta
  call @step(%tail, %k, %g, %apeD, %iro, %cache, %slots, %n, %pro, %pooled,
             %rpooled, %closed)
      : (!ring, !kv, !kv, !ape, !meta, !meta, !meta, i32, !meta, !kv, !kv,
         !meta) -> ()
  call @to_host_bf16(%tailD, %tailH) : (memref<?x?xbf16>, memref<?x?xbf16>) -> ()
  call @to_host_i32(%proD, %proH) : (memref<?xi32>, memref<?xi32>) -> ()
  call @to_host_bf16(%pooledD, %pooledH) : (memref<?x?xbf16>, memref<?x?xbf16>) -> ()
  call @to_host_bf16(%rpooledD, %rpooledH) : (memref<?x?xbf16>, memref<?x?xbf16>) -> ()
  call @to_host_i32(%closedD, %closedH) : (memref<?xi32>, memref<?xi32>) -> ()
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  %c20 = arith.constant 20 : index
  %c24 = arith.constant 24 : index
  %c128 = arith.constant 128 : index
  %c129 = arith.constant 129 : index
  %c256 = arith.constant 256 : index
  %minus1 = arith.constant -1 : i32

  %iroF = memref.get_global @iro_f : memref<3xi32>
  %cacheF = memref.get_global @cache_f : memref<2xi32>
  %iro1 = memref.get_global @iro_c1 : memref<3xi32>
  %cache1 = memref.get_global @cache_c1 : memref<2xi32>
  %iro2 = memref.get_global @iro_c2 : memref<3xi32>
  %cache2 = memref.get_global @cache_c2 : memref<2xi32>

  %apeH = memref.alloc(%c4, %c128) : memref<?x?xf32>
  call @fill_ape(%apeH) : (memref<?x?xf32>) -> ()
  %apeD = call @to_device_f32(%apeH) : (memref<?x?xf32>) -> memref<?x?xf32>
  %apeS = memref.cast %apeD : memref<?x?xf32> to memref<4x128xf32>
  %ape = memref.cast %apeS : memref<4x128xf32> to !ape

  // Inputs of each call, on the host.
  %iroFd = memref.cast %iroF : memref<3xi32> to memref<?xi32>
  %cacheFd = memref.cast %cacheF : memref<2xi32> to memref<?xi32>
  %iro1d = memref.cast %iro1 : memref<3xi32> to memref<?xi32>
  %cache1d = memref.cast %cache1 : memref<2xi32> to memref<?xi32>
  %iro2d = memref.cast %iro2 : memref<3xi32> to memref<?xi32>
  %cache2d = memref.cast %cache2 : memref<2xi32> to memref<?xi32>
  %kF = call @zeros(%c20, %c128) : (index, index) -> memref<?x?xbf16>
  %gF = call @zeros(%c20, %c128) : (index, index) -> memref<?x?xbf16>
  %kFv = call @view(%kF, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %gFv = call @view(%gF, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  call @fill(%kFv, %gFv, %iroFd, %cacheFd) : (!kv, !kv, memref<?xi32>, memref<?xi32>) -> ()
  %k1 = call @zeros(%c8, %c128) : (index, index) -> memref<?x?xbf16>
  %g1 = call @zeros(%c8, %c128) : (index, index) -> memref<?x?xbf16>
  %k1v = call @view(%k1, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %g1v = call @view(%g1, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  call @fill(%k1v, %g1v, %iro1d, %cache1d) : (!kv, !kv, memref<?xi32>, memref<?xi32>) -> ()
  %k2 = call @zeros(%c12, %c128) : (index, index) -> memref<?x?xbf16>
  %g2 = call @zeros(%c12, %c128) : (index, index) -> memref<?x?xbf16>
  %k2v = call @view(%k2, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %g2v = call @view(%g2, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  call @fill(%k2v, %g2v, %iro2d, %cache2d) : (!kv, !kv, memref<?xi32>, memref<?xi32>) -> ()
  %kM = call @zeros(%c20, %c129) : (index, index) -> memref<?x?xbf16>
  %gM = call @zeros(%c20, %c129) : (index, index) -> memref<?x?xbf16>
  %kMv = call @view(%kM, %c1, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %gMv = call @view(%gM, %c1, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  call @fill(%kMv, %gMv, %iroFd, %cacheFd) : (!kv, !kv, memref<?xi32>, memref<?xi32>) -> ()
  %kS = call @zeros(%c20, %c256) : (index, index) -> memref<?x?xbf16>
  %gS = call @zeros(%c20, %c256) : (index, index) -> memref<?x?xbf16>
  %kSv = call @view(%kS, %c0, %c2) : (memref<?x?xbf16>, index, index) -> !kv
  %gSv = call @view(%gS, %c0, %c2) : (memref<?x?xbf16>, index, index) -> !kv
  call @fill(%kSv, %gSv, %iroFd, %cacheFd) : (!kv, !kv, memref<?xi32>, memref<?xi32>) -> ()

  // Outputs, on the host: pro, pooled, ring_close rows, closed ids, ring.
  %proF = memref.alloc(%c3) : memref<?xi32>
  %pro1 = memref.alloc(%c3) : memref<?xi32>
  %pro2 = memref.alloc(%c3) : memref<?xi32>
  %proM = memref.alloc(%c3) : memref<?xi32>
  %proS = memref.alloc(%c3) : memref<?xi32>
  %closedF = memref.alloc(%c2) : memref<?xi32>
  %closed1 = memref.alloc(%c2) : memref<?xi32>
  %closed2 = memref.alloc(%c2) : memref<?xi32>
  %closedM = memref.alloc(%c2) : memref<?xi32>
  %closedS = memref.alloc(%c2) : memref<?xi32>
  %pooledF = call @zeros(%c4, %c128) : (index, index) -> memref<?x?xbf16>
  %pooled1 = call @zeros(%c1, %c128) : (index, index) -> memref<?x?xbf16>
  %pooled2 = call @zeros(%c1, %c128) : (index, index) -> memref<?x?xbf16>
  %pooledM = call @zeros(%c4, %c129) : (index, index) -> memref<?x?xbf16>
  %pooledS = call @zeros(%c4, %c128) : (index, index) -> memref<?x?xbf16>
  %rpooledF = call @zeros(%c2, %c128) : (index, index) -> memref<?x?xbf16>
  %rpooled1 = call @zeros(%c2, %c128) : (index, index) -> memref<?x?xbf16>
  %rpooled2 = call @zeros(%c2, %c128) : (index, index) -> memref<?x?xbf16>
  %rpooledM = call @zeros(%c2, %c128) : (index, index) -> memref<?x?xbf16>
  %rpooledS = call @zeros(%c2, %c128) : (index, index) -> memref<?x?xbf16>
  %tailF = call @zeros(%c24, %c128) : (index, index) -> memref<?x?xbf16>
  %tailC = call @zeros(%c24, %c128) : (index, index) -> memref<?x?xbf16>
  %tailM = call @zeros(%c24, %c128) : (index, index) -> memref<?x?xbf16>
  %tailS = call @zeros(%c24, %c128) : (index, index) -> memref<?x?xbf16>
  %zero = call @zeros(%c24, %c128) : (index, index) -> memref<?x?xbf16>
  // Poison the ids so that an unwritten one shows.
  linalg.fill ins(%minus1 : i32) outs(%proF : memref<?xi32>)
  linalg.fill ins(%minus1 : i32) outs(%pro1 : memref<?xi32>)
  linalg.fill ins(%minus1 : i32) outs(%pro2 : memref<?xi32>)
  linalg.fill ins(%minus1 : i32) outs(%proM : memref<?xi32>)
  linalg.fill ins(%minus1 : i32) outs(%proS : memref<?xi32>)
  %seven = arith.constant 7 : i32
  linalg.fill ins(%seven : i32) outs(%closedF : memref<?xi32>)
  linalg.fill ins(%seven : i32) outs(%closed1 : memref<?xi32>)
  linalg.fill ins(%seven : i32) outs(%closed2 : memref<?xi32>)
  linalg.fill ins(%seven : i32) outs(%closedM : memref<?xi32>)
  linalg.fill ins(%seven : i32) outs(%closedS : memref<?xi32>)

  call @call(%tailF, %kF, %gF, %c0, %c1, %ape, %iroF, %cacheF, %proF,
             %pooledF, %c0, %rpooledF, %closedF)
      : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index,
         !ape, memref<3xi32>, memref<2xi32>, memref<?xi32>, memref<?x?xbf16>,
         index, memref<?x?xbf16>, memref<?xi32>) -> ()
  call @call(%tailC, %k1, %g1, %c0, %c1, %ape, %iro1, %cache1, %pro1,
             %pooled1, %c0, %rpooled1, %closed1)
      : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index,
         !ape, memref<3xi32>, memref<2xi32>, memref<?xi32>, memref<?x?xbf16>,
         index, memref<?x?xbf16>, memref<?xi32>) -> ()
  call @call(%tailC, %k2, %g2, %c0, %c1, %ape, %iro2, %cache2, %pro2,
             %pooled2, %c0, %rpooled2, %closed2)
      : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index,
         !ape, memref<3xi32>, memref<2xi32>, memref<?xi32>, memref<?x?xbf16>,
         index, memref<?x?xbf16>, memref<?xi32>) -> ()
  call @call(%tailM, %kM, %gM, %c1, %c1, %ape, %iroF, %cacheF, %proM,
             %pooledM, %c1, %rpooledM, %closedM)
      : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index,
         !ape, memref<3xi32>, memref<2xi32>, memref<?xi32>, memref<?x?xbf16>,
         index, memref<?x?xbf16>, memref<?xi32>) -> ()
  call @call(%tailS, %kS, %gS, %c0, %c2, %ape, %iroF, %cacheF, %proS,
             %pooledS, %c0, %rpooledS, %closedS)
      : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index,
         !ape, memref<3xi32>, memref<2xi32>, memref<?xi32>, memref<?x?xbf16>,
         index, memref<?x?xbf16>, memref<?xi32>) -> ()

  %pF = call @view(%pooledF, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %p1 = call @view(%pooled1, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %p2 = call @view(%pooled2, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %pM = call @view(%pooledM, %c1, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %pS = call @view(%pooledS, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %rF = call @view(%rpooledF, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %r1 = call @view(%rpooled1, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %r2 = call @view(%rpooled2, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %rM = call @view(%rpooledM, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %rS = call @view(%rpooledS, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %tF = call @view(%tailF, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %tC = call @view(%tailC, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %tM = call @view(%tailM, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %tS = call @view(%tailS, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv
  %z = call @view(%zero, %c0, %c1) : (memref<?x?xbf16>, index, index) -> !kv

  // Pools 0 of request 0 (C1's compress) and 1 of request 1 (C2's compress).
  %m0 = call @mismatch(%pF, %c0, %p1, %c0, %c1) : (!kv, index, !kv, index, index) -> index
  %m1 = call @mismatch(%pF, %c3, %p2, %c0, %c1) : (!kv, index, !kv, index, index) -> index
  %mc = arith.addi %m0, %m1 : index
  vector.print str "mismatch chunked compress vs full: "
  vector.print %mc : index
  // Pool 1 of request 0 and pool 0 of request 1, closed by C2's ring_close.
  %mr = call @mismatch(%pF, %c1, %r2, %c0, %c2) : (!kv, index, !kv, index, index) -> index
  vector.print str "mismatch ring_close vs full: "
  vector.print %mr : index
  // The ring after C2 and after F: slot 2 holds positions 8..10 of request
  // 0 (rows 16..18 keys, 20..22 gates), slot 0 position 8 of request 1
  // (rows 0 and 4), slot 1 (rows 8..15) nothing.
  %t0 = call @mismatch(%tF, %c16, %tC, %c16, %c3) : (!kv, index, !kv, index, index) -> index
  %c20i = arith.constant 20 : index
  %t1 = call @mismatch(%tF, %c20i, %tC, %c20i, %c3) : (!kv, index, !kv, index, index) -> index
  %t2 = call @mismatch(%tF, %c0, %tC, %c0, %c1) : (!kv, index, !kv, index, index) -> index
  %t3 = call @mismatch(%tF, %c4, %tC, %c4, %c1) : (!kv, index, !kv, index, index) -> index
  %t4 = call @mismatch(%tC, %c8, %z, %c8, %c8) : (!kv, index, !kv, index, index) -> index
  %t5 = call @mismatch(%tF, %c16, %z, %c16, %c1) : (!kv, index, !kv, index, index) -> index
  %ta = arith.addi %t0, %t1 : index
  %tb = arith.addi %ta, %t2 : index
  %tc = arith.addi %tb, %t3 : index
  %td = arith.addi %tc, %t4 : index
  vector.print str "mismatch ring chunked vs full: "
  vector.print %td : index
  // A written ring row is not zero (the ring was really written).
  %t5z = arith.cmpi eq, %t5, %c0 : index
  vector.print str "ring row left zero: "
  vector.print %t5z : i1
  // The other code paths of the GPU mapping, same pools and ring.
  %mm = call @mismatch(%pF, %c0, %pM, %c0, %c4) : (!kv, index, !kv, index, index) -> index
  %mt = call @mismatch(%tF, %c0, %tM, %c0, %c24) : (!kv, index, !kv, index, index) -> index
  %mma = arith.addi %mm, %mt : index
  vector.print str "mismatch misaligned vs full: "
  vector.print %mma : index
  %ms = call @mismatch(%pF, %c0, %pS, %c0, %c4) : (!kv, index, !kv, index, index) -> index
  %mst = call @mismatch(%tF, %c0, %tS, %c0, %c24) : (!kv, index, !kv, index, index) -> index
  %msa = arith.addi %ms, %mst : index
  vector.print str "mismatch strided vs full: "
  vector.print %msa : index
  // Rows whose request closes no pool are zero.
  %z0 = call @mismatch(%rF, %c0, %z, %c0, %c2) : (!kv, index, !kv, index, index) -> index
  %z1 = call @mismatch(%r1, %c0, %z, %c0, %c2) : (!kv, index, !kv, index, index) -> index
  %z2 = call @mismatch(%rM, %c0, %z, %c0, %c2) : (!kv, index, !kv, index, index) -> index
  %z3 = call @mismatch(%rS, %c0, %z, %c0, %c2) : (!kv, index, !kv, index, index) -> index
  %za = arith.addi %z0, %z1 : index
  %zb = arith.addi %za, %z2 : index
  %zc = arith.addi %zb, %z3 : index
  vector.print str "mismatch unclosed rows vs zero: "
  vector.print %zc : index
  // ... and the pools are not (the kernels really ran).
  %nz = call @mismatch(%pF, %c0, %z, %c0, %c4) : (!kv, index, !kv, index, index) -> index
  vector.print str "pool values not zero: "
  vector.print %nz : index

  vector.print str "closed F: "
  call @print_ids(%closedF) : (memref<?xi32>) -> ()
  vector.print str "closed C1: "
  call @print_ids(%closed1) : (memref<?xi32>) -> ()
  vector.print str "closed C2: "
  call @print_ids(%closed2) : (memref<?xi32>) -> ()
  vector.print str "closed M S: "
  call @print_ids(%closedM) : (memref<?xi32>) -> ()
  call @print_ids(%closedS) : (memref<?xi32>) -> ()
  vector.print str "offsets F: "
  call @print_ids(%proF) : (memref<?xi32>) -> ()
  vector.print str "offsets C1: "
  call @print_ids(%pro1) : (memref<?xi32>) -> ()
  vector.print str "offsets C2: "
  call @print_ids(%pro2) : (memref<?xi32>) -> ()
  vector.print str "offsets M S: "
  call @print_ids(%proM) : (memref<?xi32>) -> ()
  call @print_ids(%proS) : (memref<?xi32>) -> ()

  // The full call's pools as f32, for comparison across backends.
  %f32 = memref.alloc(%c4, %c128) : memref<?x?xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %d = %c0 to %c128 step %c1 {
      %v = memref.load %pF[%i, %d] : !kv
      %e = arith.extf %v : bf16 to f32
      memref.store %e, %f32[%i, %d] : memref<?x?xf32>
    }
  }
  %u = memref.cast %f32 : memref<?x?xf32> to memref<*xf32>
  vector.print str "pools F:\n"
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
