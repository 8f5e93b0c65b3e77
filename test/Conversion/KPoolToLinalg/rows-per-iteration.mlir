// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg="rows-per-iteration=16" | FileCheck %s
// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg | FileCheck %s --check-prefix=ONE
// RUN: not kpool-opt %s -split-input-file -convert-kpool-to-linalg="rows-per-iteration=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: kpool-opt %s -split-input-file -kpool-fuse-step -convert-kpool-to-linalg="step-offsets=scan rows-per-iteration=16" | FileCheck %s --check-prefix=STEP
// RUN: kpool-opt %s -split-input-file -kpool-fuse-step -convert-kpool-to-linalg="rows-per-iteration=16" | FileCheck %s --check-prefix=WALK

// rows-per-iteration=N: each iteration of compress's parallel loop takes N
// consecutive pooled rows in order. It carries the request that claimed the
// previous row, that request's claimed rows [lo, end), and the bases of its
// member rows and entry ids; a row inside [lo, end) is that request's next
// pool, any other row searches for its claimant (binary search, then the
// scan for a row the candidate does not claim). The CPU pipeline uses 16;
// the default, 1, searches for every row (what the GPU mapping expects).

// CHECK-LABEL: func.func @compress
// CHECK:       %[[ROWS:.*]] = memref.dim %arg5, %c0 : memref<?x32xf32>
// CHECK:       %[[TILES:.*]] = arith.ceildivui %[[ROWS]], %c16 : index
// CHECK:       scf.parallel (%[[T:.*]]) = (%c0) to (%[[TILES]]) step (%c1) {
// CHECK:         %[[BEGIN:.*]] = arith.muli %[[T]], %c16 : index
// CHECK:         %[[NEXT:.*]] = arith.addi %[[BEGIN]], %c16 : index
// CHECK:         %[[END:.*]] = arith.minui %[[NEXT]], %[[ROWS]] : index
// CHECK:         scf.for %[[R:.*]] = %[[BEGIN]] to %[[END]] step %c1 iter_args(%[[OWNER:.*]] = %c-1_i64, %[[LO:.*]] = %c0_i64, %[[HI:.*]] = %c0_i64, %{{.*}} = %c0_i64, %{{.*}} = %c0_i64) -> (i64, i64, i64, i64, i64) {
// CHECK:           %[[ROW:.*]] = arith.index_castui %[[R]] : index to i64
// CHECK:           %[[GE:.*]] = arith.cmpi sge, %[[ROW]], %[[LO]] : i64
// CHECK:           %[[LT:.*]] = arith.cmpi slt, %[[ROW]], %[[HI]] : i64
// CHECK:           %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK:           scf.if %[[IN]] -> (i64, i64, i64, i64, i64) {
// CHECK-NEXT:        scf.yield %[[OWNER]], %[[LO]], %[[HI]]
// CHECK-NEXT:      } else {
// CHECK:             scf.while
// CHECK:           linalg.generic
// CHECK:           scf.yield
// ONE-LABEL:   func.func @compress
// ONE-NOT:     arith.ceildivui
// ONE:         scf.parallel
// ONE-NOT:     iter_args
// ONE:         return
// BAD:         convert-kpool-to-linalg: rows-per-iteration must be at least 1, got 0
func.func @compress(%k: memref<?x32xf32>, %ape: memref<2x32xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cache: memref<?xui32>,
    %out: memref<?x32xf32>) {
  kpool.compress kpool(2) head_dim(32)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : memref<?x32xf32>, memref<?x32xf32>, memref<2x32xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%out : memref<?x32xf32>)
  return
}

// -----

// kpool.step tiles its pooled rows only with step-offsets=scan (the CPU's
// choice): its iterations are the batch rows, then one per 16 pooled rows,
// each tile bounded by the total the scan found. The walk (one GPU launch)
// keeps a row per iteration.
// STEP-LABEL:  func.func @step
// STEP:        %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c16 : index
// STEP:        %[[ITEMS:.*]] = arith.addi %{{.*}}, %[[TILES]] : index
// STEP:        scf.parallel (%{{.*}}) = (%c0) to (%[[ITEMS]])
// STEP:        %[[BOUND:.*]] = arith.minui %[[TOTAL:.*]], %{{.*}} : i64
// STEP:        %[[END:.*]] = arith.index_castui %[[BOUND]] : i64 to index
// STEP:        arith.minui %{{.*}}, %[[END]] : index
// STEP:        scf.for {{.*}} iter_args(%{{.*}} = %c-1_i64, {{.*}}) -> (i64, i64, i64, i64, i64)
// WALK-LABEL:  func.func @step
// WALK-NOT:    arith.ceildivui
// WALK-NOT:    iter_args(%{{.*}} = %c-1_i64
!kv = memref<?x8xbf16>
!ring = memref<?x2x4x8xbf16>
!meta = memref<?xui32>
func.func @step(%tail: !ring, %k: !kv, %gate: !kv, %ape: memref<4x8xf32>,
    %iro: !meta, %cache: !meta, %slots: !meta, %n: i32, %closed: !kv,
    %ids: memref<?xi32>, %pro: !meta, %pooled: !kv) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, memref<?xi32>)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  return
}
