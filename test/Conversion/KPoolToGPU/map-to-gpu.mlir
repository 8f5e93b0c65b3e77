// RUN: kpool-opt %s -convert-kpool-to-linalg -kpool-map-to-gpu -canonicalize -cse | FileCheck %s
// RUN: kpool-opt %s -convert-kpool-to-linalg -kpool-map-to-gpu="vector-bytes=8 block-size=64" -canonicalize -cse | FileCheck %s --check-prefix=OPT

// kpool-map-to-gpu on the output of convert-kpool-to-linalg: one gpu.launch
// per parallel loop (twice per op when the innermost strides are dynamic:
// the unit-stride version and the general one), a row per group of lanes,
// the channels spread over the lanes.

!kv = memref<?x128xbf16, strided<[?, ?], offset: ?>>
!ape = memref<4x128xf32, strided<[?, ?], offset: ?>>
!meta = memref<?xi32, strided<[?], offset: ?>>

// CHECK-LABEL: func.func @compress_bf16
// The unit-stride version: 16 lanes of 8 channels (16 bytes) per row, 16
// rows per block, a block per 16 pooled rows up to 1024 blocks (grid-blocks);
// nothing launched for none.
// CHECK:       %[[NEED:.*]] = arith.ceildivui %[[ROWS:.*]], %c16 : index
// CHECK:       %[[GRID:.*]] = arith.minui %[[NEED]], %c1024 : index
// CHECK:       %[[ANY:.*]] = arith.cmpi ugt, %[[ROWS]], %c0 : index
// Vector accesses only when every operand the rows view is 16-byte aligned
// with row strides that keep it so: checked once, on the host, for k, gate,
// ape and pooled.
// CHECK-COUNT-4: memref.extract_aligned_pointer_as_index
// CHECK:       %[[APE_OK:.*]] = arith.andi %{{.*}} : i1
// CHECK:       %[[ALIGNED:.*]] = arith.andi %{{.*}} : i1
// CHECK-NEXT:  scf.if %[[ANY]] {
// CHECK-NEXT:    gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %[[GRID]], %{{.*}} = %c1, %{{.*}} = %c1) threads(%[[TX:.*]], %[[TY:.*]], %{{.*}}) in (%{{.*}} = %c16, %{{.*}} = %c16, %{{.*}} = %c1) function(@compress_bf16_kpool_compress) {
// CHECK-NEXT:      %[[R0:.*]] = arith.muli %[[BX]], %c16 : index
// CHECK-NEXT:      %[[FIRSTROW:.*]] = arith.addi %[[R0]], %[[TY]] : index
// CHECK-NEXT:      %[[STRIDE:.*]] = arith.muli %[[GX]], %c16 : index
// ape, the same for every row: loaded once per thread, before the rows.
// CHECK:           %[[C:.*]] = arith.muli %[[TX]], %c8 : index
// CHECK-COUNT-4:   vector.load %{{.*}} {alignment = 16 : i64} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
// A grid-stride loop over the rows.
// CHECK:           scf.for %{{.*}} = %[[FIRSTROW]] to %[[ROWS]] step %[[STRIDE]] {
// The row's request, by binary search over pool_row_offsets.
// CHECK:             scf.while
// CHECK-NOT:         memref.extract_aligned_pointer_as_index
// CHECK:             scf.if %[[ALIGNED]] {
// One 8-channel step per lane: no channel loop.
// CHECK-NOT:           scf.for
// CHECK-COUNT-8:       vector.load %{{.*}} {alignment = 16 : i64} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK-NOT:           vector.load
// fast-math: exp(x) = exp2(x * log2 e), an approximate division.
// CHECK:               arith.mulf %{{.*}}, %cst{{.*}} : vector<8xf32>
// CHECK-NEXT:          math.exp2 %{{.*}} : vector<8xf32>
// CHECK:               arith.divf %{{.*}} fastmath<afn> : vector<8xf32>
// CHECK:               vector.store %{{.*}} {alignment = 16 : i64} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:             } else {
// CHECK-NEXT:          scf.for %{{.*}} = %[[TX]] to %c128 step %c16 {
// CHECK:                 math.exp2 %{{.*}} : f32
// CHECK:                 arith.divf %{{.*}} fastmath<afn> : f32
// CHECK:                 memref.store %{{.*}} : memref<128xbf16, strided<[1], offset: ?>>
// CHECK:             gpu.terminator
// The general version: scalar, 32 lanes (a warp) per row, 8 rows per block.
// CHECK:       gpu.launch {{.*}} threads(%[[TX2:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c8, %{{.*}} = %c1) function(@compress_bf16_kpool_compress_strided) {
// CHECK-NOT:     vector.load
// CHECK:         scf.for %{{.*}} = %[[TX2]] to %c128 step %c32 {
// CHECK:           memref.store %{{.*}} : memref<128xbf16, strided<[?], offset: ?>>
// CHECK:         gpu.terminator
// CHECK-NOT:   scf.parallel
// CHECK:       return

// OPT-LABEL: func.func @compress_bf16
// 8 bytes: 4 channels per lane, 32 lanes, 2 rows per 64-thread block.
// OPT:         gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c2, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// OPT:           vector.load %{{.*}} {alignment = 8 : i64} : memref<4xbf16, strided<[1], offset: ?>>, vector<4xbf16>
// OPT:           vector.load %{{.*}} {alignment = 16 : i64} : memref<4xf32, strided<[1], offset: ?>>, vector<4xf32>
// OPT:           vector.store %{{.*}} {alignment = 8 : i64} : memref<4xbf16, strided<[1], offset: ?>>, vector<4xbf16>
// OPT:         gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c2, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
func.func @compress_bf16(%k: !kv, %g: !kv, %ape: !ape, %iro: !meta,
                         %pro: !meta, %cache: !meta, %out: !kv) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, !ape, !meta, !meta, !meta)
      outs(%out : !kv)
  return
}

// CHECK-LABEL: func.func @ring_close_bf16
// CHECK:       gpu.launch {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c16, %{{.*}} = %c16, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// closed_pool is stored by lane 0 of the row only.
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %c0 : index
// CHECK-NEXT:    scf.if %[[FIRST]] {
// CHECK-NEXT:      memref.store %{{.*}} : memref<?xi32, strided<[?], offset: ?>>
// A closing row pools ring and k/gate members; the others are zeroed, both
// spread over the lanes.
// CHECK:         vector.load %{{.*}} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:         vector.store %{{.*}} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:         scf.for %{{.*}} = %[[TX]] to %c128 step %c16 {
// CHECK:         vector.store %cst{{.*}} {alignment = 16 : i64} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:         gpu.terminator
// CHECK:       gpu.launch
// CHECK-NOT:   scf.parallel
// CHECK:       return
func.func @ring_close_bf16(%tail: memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                           %k: !kv, %g: !kv, %ape: !ape, %iro: !meta,
                           %cache: !meta, %slots: !meta, %n: i32,
                           %pooled: !kv, %closed: !meta) {
  kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>, !kv,
            !kv, !ape, !meta, !meta, !meta)
      num_requests(%n) outs(%pooled, %closed : !kv, !meta)
  return
}

// Dense operands: one version, no stride check. Each request copies its
// trailing rows with all its lanes.
// CHECK-LABEL: func.func @seed_tail_dense
// CHECK:       gpu.launch {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c16, %{{.*}} = %c16, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1 {
// CHECK:           %[[LB:.*]] = arith.muli %[[TX]], %c8 : index
// CHECK-NEXT:      memref.subview %{{.*}}[%[[LB]]] [8] [1]
// CHECK-NEXT:      memref.subview %{{.*}}[%[[LB]]] [8] [1]
// CHECK-NEXT:      %[[V:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK-NEXT:      vector.store %[[V]], %{{.*}} {alignment = 16 : i64} : memref<8xbf16, strided<[1], offset: ?>>, vector<8xbf16>
// CHECK:         gpu.terminator
// CHECK-NOT:   gpu.launch
// CHECK:       return
func.func @seed_tail_dense(%tail: memref<?x2x4x128xbf16>, %k: memref<?x128xbf16>,
                           %g: memref<?x128xbf16>, %iro: memref<?xi32>,
                           %cache: memref<?xi32>, %slots: memref<?xi32>,
                           %n: i32) {
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %g, %iro, %cache, %slots
          : memref<?x128xbf16>, memref<?x128xbf16>, memref<?xi32>,
            memref<?xi32>, memref<?xi32>)
      num_requests(%n) outs(%tail : memref<?x2x4x128xbf16>)
  return
}

// The sequential scan runs on one thread of one block.
// CHECK-LABEL: func.func @pool_offsets
// CHECK:       gpu.launch blocks({{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c1, %{{.*}} = %c1) threads({{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c1, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// CHECK:         scf.for
// CHECK:           memref.store
// CHECK:         gpu.terminator
// CHECK-NOT:   scf.parallel
// CHECK:       return
func.func @pool_offsets(%iro: memref<?xi32>, %cache: memref<?xi32>,
                        %pro: memref<?xi32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  return
}

// f32: 4 channels (16 bytes) per lane, a warp per row, 8 rows per block;
// ape (4 rows) preloaded, k and gate per row. f32 pools keep the accurate
// arithmetic (fast-math is for bf16 and f16 pools).
// CHECK-LABEL: func.func @compress_f32
// CHECK:       gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c8, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<4xf32, strided<[1], offset: ?>>, vector<4xf32>
// CHECK:         scf.for
// CHECK-COUNT-8:   vector.load %{{.*}} {alignment = 16 : i64} : memref<4xf32, strided<[1], offset: ?>>, vector<4xf32>
// CHECK-NOT:       math.exp2
// CHECK:           math.exp %{{.*}} : vector<4xf32>
// CHECK-NOT:       fastmath
// CHECK:           vector.store %{{.*}} {alignment = 16 : i64} : memref<4xf32, strided<[1], offset: ?>>, vector<4xf32>
func.func @compress_f32(%k: memref<?x128xf32>, %g: memref<?x128xf32>,
                        %ape: memref<4x128xf32>, %iro: memref<?xi32>,
                        %pro: memref<?xi32>, %cache: memref<?xi32>,
                        %out: memref<?x128xf32>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : memref<?x128xf32>, memref<?x128xf32>, memref<4x128xf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%out : memref<?x128xf32>)
  return
}

// head_dim 100 (not a multiple of 8): 4 channels (8 bytes) per lane, 25
// lanes, 10 rows per block.
// CHECK-LABEL: func.func @compress_f16_d100
// CHECK:       gpu.launch {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c25, %{{.*}} = %c10, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// The row stride (100 elements, 200 bytes) keeps k, gate and pooled rows
// 8-byte aligned, so the check is on the host; ape's rows (400 bytes) too.
// CHECK:         %[[LB:.*]] = arith.muli %[[TX]], %c4 : index
// CHECK-COUNT-3:   vector.load %{{.*}} {alignment = 16 : i64} : memref<4xf32, strided<[1], offset: ?>>, vector<4xf32>
// CHECK:         scf.for
// CHECK-NOT:       arith.andi %{{.*}}, %c7 : index
// CHECK-COUNT-6:   vector.load %{{.*}} {alignment = 8 : i64} : memref<4xf16, strided<[1], offset: ?>>, vector<4xf16>
// CHECK:           vector.store %{{.*}} {alignment = 8 : i64} : memref<4xf16, strided<[1], offset: ?>>, vector<4xf16>
// CHECK:           scf.for %{{.*}} = %[[TX]] to %c100 step %c25 {
func.func @compress_f16_d100(%k: memref<?x100xf16>, %g: memref<?x100xf16>,
                             %ape: memref<3x100xf32>, %iro: memref<?xi32>,
                             %pro: memref<?xi32>, %cache: memref<?xi32>,
                             %out: memref<?x100xf16>) {
  kpool.compress kpool(3) head_dim(100)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : memref<?x100xf16>, memref<?x100xf16>, memref<3x100xf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%out : memref<?x100xf16>)
  return
}

// head_dim 7: no vector width divides it; scalar, 7 lanes, 36 rows.
// CHECK-LABEL: func.func @compress_bf16_d7
// CHECK:       gpu.launch {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c7, %{{.*}} = %c36, %{{.*}} = %c1) function(@{{[a-z0-9_]+}}) {
// CHECK-NOT:     vector.
// CHECK:         scf.for %{{.*}} = %[[TX]] to %c7 step %c7 {
// CHECK-NOT:     vector.
// CHECK:         gpu.terminator
func.func @compress_bf16_d7(%k: memref<?x7xbf16>, %g: memref<?x7xbf16>,
                            %ape: memref<1x7xf32>, %iro: memref<?xi32>,
                            %pro: memref<?xi32>, %cache: memref<?xi32>,
                            %out: memref<?x7xbf16>) {
  kpool.compress kpool(1) head_dim(7)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : memref<?x7xbf16>, memref<?x7xbf16>, memref<1x7xf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%out : memref<?x7xbf16>)
  return
}

// A function without parallel loops is left alone, host buffers and all.
// CHECK-LABEL: func.func @host_only
// CHECK:         memref.alloc
// CHECK-NEXT:    memref.store
// CHECK-NOT:     gpu.launch
func.func @host_only(%v: f32) -> memref<4xf32> {
  %c0 = arith.constant 0 : index
  %m = memref.alloc() : memref<4xf32>
  memref.store %v, %m[%c0] : memref<4xf32>
  return %m : memref<4xf32>
}
