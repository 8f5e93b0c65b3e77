// REQUIRES: ptxas
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa bufferize=false" -o %t
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t --ptxas %ptxas --no-extern | FileCheck %s
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t | FileCheck %s --check-prefix=PTX
// On sm_80, below the FP8 conversion instructions (sm_89): the pipeline
// takes the exact software conversion, and the kernels still assemble.
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa bufferize=false chip=sm_80 features=+ptx80" -o %t.sm80
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.sm80 --ptxas %ptxas --arch sm_80 --no-extern | FileCheck %s
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.sm80 | FileCheck %s --check-prefix=SM80

// Pool-cache kernels beyond the production configuration, lowered to PTX
// and assembled by ptxas: f32 head_dim 128 FP8 with the rotation (32 lanes
// a row), f16 head_dim 64 entries of the element type with the rotation (8
// lanes), bf16 head_dim 100 without it (32 lanes, 4 of them share an
// entry), bf16 head_dim 8 kpool 1 FP8 pow2 (one lane), bf16 head_dim 100
// FP8 on strided views, an f16 ring_close into FP8 and f32 head_dim 7.

// CHECK-DAG: @c1_kpool_compress: ptxas ok
// CHECK-DAG: @c2_kpool_step: ptxas ok
// CHECK-DAG: @c3_kpool_compress: ptxas ok
// CHECK-DAG: @c4_kpool_step: ptxas ok
// CHECK-DAG: @c5_kpool_compress: ptxas ok
// CHECK-DAG: @c6_kpool_ring_close: ptxas ok
// CHECK-DAG: @c7_kpool_compress: ptxas ok
// CHECK-NOT: ptxas failed
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: shfl.sync.bfly
// SM80-NOT: e4m3x2

func.func @c1(%k: memref<?x128xf32>, %gate: memref<?x128xf32>, %ape: memref<4x128xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cl: memref<?xui32>,
    %bt: memref<?x?xi32>, %pooled: memref<?x128xf32>,
    %codes: memref<?x?x128xf8E4M3FN>, %scales: memref<?x?xf32>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cl
          : memref<?x128xf32>, memref<?x128xf32>, memref<4x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xf32>)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, memref<?x?x128xf8E4M3FN>, memref<?x?xf32>)
      rotate(hadamard) scale(absmax)
  return
}

func.func @c2(%k: memref<?x64xf16>, %gate: memref<?x64xf16>,
    %ape: memref<4x64xf32>, %iro: memref<?xui32>,
    %cl: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %bt: memref<?x?xi32>,
    %closed: memref<?x64xf16>, %closed_pool: memref<?xi32>,
    %pro: memref<?xui32>, %pooled: memref<?x64xf16>,
    %tail: memref<?x2x4x64xf16>, %ck: memref<?x?x64xf16>) {
  kpool.step kpool(4) head_dim(64)
      ins(%k, %gate, %ape, %iro, %cl, %slots
          : memref<?x64xf16>, memref<?x64xf16>, memref<4x64xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%closed, %closed_pool, %pro, %pooled, %tail
           : memref<?x64xf16>, memref<?xi32>, memref<?xui32>,
             memref<?x64xf16>, memref<?x2x4x64xf16>)
      to_cache(%bt, %ck : memref<?x?xi32>, memref<?x?x64xf16>)
      rotate(hadamard)
  return
}

func.func @c3(%k: memref<?x100xbf16>, %gate: memref<?x100xbf16>, %ape: memref<4x100xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cl: memref<?xui32>,
    %bt: memref<?x?xui32>, %pooled: memref<?x100xbf16>,
    %ck: memref<?x?x100xbf16>) {
  kpool.compress kpool(4) head_dim(100)
      ins(%k, %gate, %ape, %iro, %pro, %cl
          : memref<?x100xbf16>, memref<?x100xbf16>, memref<4x100xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x100xbf16>)
      to_cache(%bt, %ck : memref<?x?xui32>, memref<?x?x100xbf16>)
  return
}

func.func @c4(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<1x8xf32>, %iro: memref<?xui32>,
    %cl: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %bt: memref<?x?xi32>,
    %closed: memref<?x8xbf16>, %closed_pool: memref<?xi32>,
    %pro: memref<?xui32>, %pooled: memref<?x8xbf16>,
    %tail: memref<?x2x1x8xbf16>, %ck: memref<?x?x8xf8E4M3FN>, %cs: memref<?x?xf32>) {
  kpool.step kpool(1) head_dim(8)
      ins(%k, %gate, %ape, %iro, %cl, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<1x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%closed, %closed_pool, %pro, %pooled, %tail
           : memref<?x8xbf16>, memref<?xi32>, memref<?xui32>,
             memref<?x8xbf16>, memref<?x2x1x8xbf16>)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x?x8xf8E4M3FN>, memref<?x?xf32>)
      rotate(hadamard) scale(pow2)
  return
}

func.func @c5(%k: memref<?x100xbf16>, %gate: memref<?x100xbf16>, %ape: memref<4x100xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cl: memref<?xui32>,
    %bt: memref<?x?xi32, strided<[?, ?], offset: ?>>, %pooled: memref<?x100xbf16>,
    %ck: memref<?x?x100xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, %cs: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
  kpool.compress kpool(4) head_dim(100)
      ins(%k, %gate, %ape, %iro, %pro, %cl
          : memref<?x100xbf16>, memref<?x100xbf16>, memref<4x100xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x100xbf16>)
      to_cache(%bt, %ck, %cs : memref<?x?xi32, strided<[?, ?], offset: ?>>, memref<?x?x100xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
      scale(absmax)
  return
}

func.func @c6(%tail: memref<?x2x4x48xf16>, %k: memref<?x48xf16>, %ape: memref<4x48xf32>,
    %m: memref<?xui32>, %n: i32, %p: memref<?x48xf16>, %id: memref<?xi32>,
    %bt: memref<?x?xui32>, %ck: memref<?x?x48xf8E4M3FN>, %cs: memref<?x?xf32>) {
  kpool.ring_close kpool(4) head_dim(48)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x48xf16>, memref<?x48xf16>,
          memref<?x48xf16>, memref<4x48xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%p, %id : memref<?x48xf16>, memref<?xi32>)
      to_cache(%bt, %ck, %cs : memref<?x?xui32>, memref<?x?x48xf8E4M3FN>, memref<?x?xf32>)
      scale(pow2)
  return
}

func.func @c7(%k: memref<?x7xf32>, %gate: memref<?x7xf32>, %ape: memref<4x7xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cl: memref<?xui32>,
    %bt: memref<?x?xi32>, %pooled: memref<?x7xf32>,
    %codes: memref<?x?x7xf8E4M3FN>, %scales: memref<?x?xf32>) {
  kpool.compress kpool(4) head_dim(7)
      ins(%k, %gate, %ape, %iro, %pro, %cl
          : memref<?x7xf32>, memref<?x7xf32>, memref<4x7xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x7xf32>)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, memref<?x?x7xf8E4M3FN>, memref<?x?xf32>)
      scale(absmax)
  return
}
