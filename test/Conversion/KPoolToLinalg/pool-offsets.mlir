// RUN: kpool-opt %s -convert-kpool-to-linalg | FileCheck %s

// kpool.pool_offsets: a sequential scan in 64 bits inside a one-iteration
// scf.parallel; every store is guarded by the output's length.

// CHECK-LABEL: func @pool_offsets
//  CHECK-SAME:   (%[[IRO_U:[^:]+]]: memref<?xui32>, %[[C:[^:]+]]: memref<?xi32>, %[[OUT_U:[^:]+]]: memref<?xui32, strided<[?], offset: ?>>)
//   CHECK-DAG:   %[[IRO:.*]] = builtin.unrealized_conversion_cast %[[IRO_U]] : memref<?xui32> to memref<?xi32>
//   CHECK-DAG:   %[[OUT:.*]] = builtin.unrealized_conversion_cast %[[OUT_U]] : memref<?xui32, strided<[?], offset: ?>> to memref<?xi32, strided<[?], offset: ?>>
//       CHECK:   %[[BATCH:.*]] = arith.maxsi
//       CHECK:   %[[LEN:.*]] = memref.dim %[[OUT]], %{{.*}}
//       CHECK:   scf.parallel (%{{.*}}) = (%[[C0:.*]]) to (%[[C1:.*]]) step (%[[C1]]) {
//       CHECK:     %[[SUM:.*]] = scf.for %[[B:.*]] = %{{.*}} to %[[BATCH]] step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (i64) {
//       CHECK:       %[[FITS:.*]] = arith.cmpi ult, %[[B]], %[[LEN]] : index
//       CHECK:       scf.if %[[FITS]] {
//       CHECK:         %[[V:.*]] = arith.trunci %[[ACC]] : i64 to i32
//       CHECK:         memref.store %[[V]], %[[OUT]][%[[B]]]
//       CHECK:       }
//       CHECK:       memref.load %[[IRO]]
//       CHECK:       memref.load %[[IRO]]
//       CHECK:       memref.load %[[C]]
// count = max(0, floor((c + n) / K) - ceil(c / K)).
//       CHECK:       arith.divui
//       CHECK:       arith.divui
//       CHECK:       %[[COUNT:.*]] = arith.select
//       CHECK:       %[[NEXT:.*]] = arith.addi %[[ACC]], %[[COUNT]] : i64
//       CHECK:       scf.yield %[[NEXT]] : i64
//       CHECK:     }
//       CHECK:     %[[LAST_FITS:.*]] = arith.cmpi ult, %[[BATCH]], %[[LEN]] : index
//       CHECK:     scf.if %[[LAST_FITS]] {
//       CHECK:       %[[T:.*]] = arith.trunci %[[SUM]] : i64 to i32
//       CHECK:       memref.store %[[T]], %[[OUT]][%[[BATCH]]]
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   kpool.pool_offsets
//       CHECK:   return
func.func @pool_offsets(%iro: memref<?xui32>, %cache: memref<?xi32>,
    %pro: memref<?xui32, strided<[?], offset: ?>>) {
  kpool.pool_offsets kpool(4)
      ins(%iro, %cache : memref<?xui32>, memref<?xi32>)
      outs(%pro : memref<?xui32, strided<[?], offset: ?>>)
  return
}
