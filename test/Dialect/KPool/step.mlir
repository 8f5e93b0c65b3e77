// RUN: kpool-opt %s -split-input-file | kpool-opt -split-input-file | FileCheck %s
// RUN: kpool-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// kpool.step, the fused serving step (KPoolOps.td): it round-trips in the
// tensor and buffer forms, and bufferizes in place: the ring and the pooled
// rows are read and written, the other outputs are only written.

// CHECK-LABEL: func.func @step_tensor
// CHECK: %{{.*}}:5 = kpool.step kpool(4) head_dim(128) ins(%{{.*}} : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>) num_requests(%{{.*}}) outs(%{{.*}} : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x128xbf16>, tensor<?x2x4x128xbf16>) -> tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
// BUF-LABEL: func.func @step_tensor
// BUF-SAME: (%[[TAIL:.*]]: memref<?x2x4x128xbf16, {{.*}}>, %[[K:.*]]: memref<?x128xbf16, {{.*}}>, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}: i32, %[[C:.*]]: memref<?x128xbf16, {{.*}}>, %[[ID:.*]]: memref<?xi32, {{.*}}>, %[[PRO:.*]]: memref<?xui32, {{.*}}>, %[[P:.*]]: memref<?x128xbf16, {{.*}}>)
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: kpool.step kpool(4) head_dim(128) ins(%[[K]], {{.*}}) num_requests(%{{.*}}) outs(%[[C]], %[[ID]], %[[PRO]], %[[P]], %[[TAIL]] :
// BUF: return %[[C]], %[[ID]], %[[PRO]], %[[P]], %[[TAIL]]
func.func @step_tensor(%tail: tensor<?x2x4x128xbf16>, %k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %cinit: tensor<?x128xbf16>, %idinit: tensor<?xi32>,
    %proinit: tensor<?xui32>, %pinit: tensor<?x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x128xbf16>,
        tensor<?x2x4x128xbf16>) {
  %c, %id, %pro, %p, %ring = kpool.step kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%cinit, %idinit, %proinit, %pinit, %tail
           : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
             tensor<?x128xbf16>, tensor<?x2x4x128xbf16>)
      -> tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
         tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
  return %c, %id, %pro, %p, %ring : tensor<?x128xbf16>, tensor<?xi32>,
      tensor<?xui32>, tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
}

// -----

// CHECK-LABEL: func.func @step_buffer
// CHECK: kpool.step kpool(3) head_dim(8) ins({{.*}}) num_requests(%{{.*}}) outs({{.*}} : memref<?x8xf16, strided<[?, ?], offset: ?>>, memref<?xi32>, memref<?xi32>, memref<?x8xf16, strided<[?, ?], offset: ?>>, memref<?x2x?x8xf16>)
// CHECK-NOT: ->
func.func @step_buffer(%tail: memref<?x2x?x8xf16>,
    %k: memref<?x8xf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x8xf16, strided<[?, ?], offset: ?>>, %ape: memref<3x8xf32>,
    %iro: memref<?xi32>, %cache: memref<?xi32>, %slots: memref<?xi32>,
    %n: i32, %c: memref<?x8xf16, strided<[?, ?], offset: ?>>,
    %id: memref<?xi32>, %pro: memref<?xi32>,
    %p: memref<?x8xf16, strided<[?, ?], offset: ?>>) {
  kpool.step kpool(3) head_dim(8)
      ins(%k, %gate, %ape, %iro, %cache, %slots
          : memref<?x8xf16, strided<[?, ?], offset: ?>>,
            memref<?x8xf16, strided<[?, ?], offset: ?>>, memref<3x8xf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      num_requests(%n)
      outs(%c, %id, %pro, %p, %tail
           : memref<?x8xf16, strided<[?, ?], offset: ?>>, memref<?xi32>,
             memref<?xi32>, memref<?x8xf16, strided<[?, ?], offset: ?>>,
             memref<?x2x?x8xf16>)
  return
}
