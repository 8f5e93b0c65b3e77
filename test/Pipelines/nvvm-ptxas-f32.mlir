// REQUIRES: ptxas
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false" -o %t
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t --ptxas %ptxas --no-extern | FileCheck %s
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t | FileCheck %s --check-prefix=PTX
// The same functions with each serving step fused into one kpool.step
// (the pipelines' default): its kernels assemble too.
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa" -o %t.fused
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t.fused --ptxas %ptxas --no-extern | FileCheck %s --check-prefix=STEP

// Every kernel of every op on f32, for kpool 4 / head_dim 128 (production),
// kpool 1, kpool 3 with head_dim 100 (not a multiple of 8) and kpool 2 with
// head_dim 7 (no vector width divides it), lowered to PTX for sm_90 and
// assembled by ptxas; no call may be left unresolved (libdevice's __nv_expf
// is linked from the CUDA toolkit).

// CHECK: @f32_k4_d128_kpool_ring_close: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_pool_offsets: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_pool_offsets_mismatch: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_compress: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_compress_strided: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @f32_k4_d128_kpool_seed_tail_strided: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_ring_close: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_pool_offsets: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_pool_offsets_mismatch: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_compress: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_compress_strided: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @f32_k1_d128_kpool_seed_tail_strided: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_ring_close: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_pool_offsets: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_pool_offsets_mismatch: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_compress: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_compress_strided: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @f32_k3_d100_kpool_seed_tail_strided: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_ring_close: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_pool_offsets: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_pool_offsets_mismatch: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_compress: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_compress_strided: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @f32_k2_d7_kpool_seed_tail_strided: ptxas ok
// CHECK-NOT: ptxas

// Fused: one kernel per step (and its general-stride copy, and the one
// that runs when an extent contradicts the op).
// STEP: @f32_k4_d128_kpool_step: ptxas ok
// STEP-NEXT: @f32_k4_d128_kpool_step_strided: ptxas ok
// STEP-NEXT: @f32_k4_d128_kpool_step_mismatch: ptxas ok
// STEP-NEXT: @f32_k1_d128_kpool_step: ptxas ok
// STEP-NEXT: @f32_k1_d128_kpool_step_strided: ptxas ok
// STEP-NEXT: @f32_k1_d128_kpool_step_mismatch: ptxas ok
// STEP-NEXT: @f32_k3_d100_kpool_step: ptxas ok
// STEP-NEXT: @f32_k3_d100_kpool_step_strided: ptxas ok
// STEP-NEXT: @f32_k3_d100_kpool_step_mismatch: ptxas ok
// STEP-NEXT: @f32_k2_d7_kpool_step: ptxas ok
// STEP-NEXT: @f32_k2_d7_kpool_step_strided: ptxas ok
// STEP-NEXT: @f32_k2_d7_kpool_step_mismatch: ptxas ok

// The compress kernels: 16-byte loads and stores of 4 f32 channels for
// head_dim 128 and 100 (100 = 25 x 4), scalar for head_dim 7.
// PTX-LABEL: // ---- gpu.binary @f32_k4_d128_kpool_compress
// PTX:       .target sm_90
// PTX:       ld.global.nc.v4.b32
// PTX:       st.global.v4.b32
// PTX-LABEL: // ---- gpu.binary @f32_k3_d100_kpool_compress
// PTX:       ld.global.nc.v4.b32
// PTX:       st.global.v4.b32
// PTX-LABEL: // ---- gpu.binary @f32_k2_d7_kpool_compress
// PTX-NOT:   ld.global.v
// PTX:       // ---- gpu.binary @f32_k2_d7_kpool_compress_strided


func.func @f32_k4_d128(%k: tensor<?x128xf32>, %g: tensor<?x128xf32>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x128xf32>, %init: tensor<?x128xf32>, %pinit: tensor<?x128xf32>,
    %cinit: tensor<?xi32>, %oinit: tensor<?xui32>)
    -> (tensor<?x128xf32>, tensor<?x2x4x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xui32>) {
  %p, %c = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x4x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x128xf32>, tensor<?xi32>)
      -> tensor<?x128xf32>, tensor<?xi32>
  %o = kpool.pool_offsets kpool(4) ins(%iro, %cl : tensor<?xui32>, tensor<?xui32>)
      outs(%oinit : tensor<?xui32>) -> tensor<?xui32>
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %g, %ape, %iro, %o, %cl
          : tensor<?x128xf32>, tensor<?x128xf32>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xf32>) -> tensor<?x128xf32>
  %t = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x128xf32>, tensor<?x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x4x128xf32>) -> tensor<?x2x4x128xf32>
  return %pooled, %t, %p, %c, %o : tensor<?x128xf32>, tensor<?x2x4x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xui32>
}

func.func @f32_k1_d128(%k: tensor<?x128xf32>, %g: tensor<?x128xf32>, %ape: tensor<1x128xf32>,
    %iro: tensor<?xui32>, %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x1x128xf32>, %init: tensor<?x128xf32>, %pinit: tensor<?x128xf32>,
    %cinit: tensor<?xi32>, %oinit: tensor<?xui32>)
    -> (tensor<?x128xf32>, tensor<?x2x1x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xui32>) {
  %p, %c = kpool.ring_close kpool(1) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x1x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<1x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x128xf32>, tensor<?xi32>)
      -> tensor<?x128xf32>, tensor<?xi32>
  %o = kpool.pool_offsets kpool(1) ins(%iro, %cl : tensor<?xui32>, tensor<?xui32>)
      outs(%oinit : tensor<?xui32>) -> tensor<?xui32>
  %pooled = kpool.compress kpool(1) head_dim(128)
      ins(%k, %g, %ape, %iro, %o, %cl
          : tensor<?x128xf32>, tensor<?x128xf32>, tensor<1x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xf32>) -> tensor<?x128xf32>
  %t = kpool.seed_tail kpool(1) head_dim(128)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x128xf32>, tensor<?x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x1x128xf32>) -> tensor<?x2x1x128xf32>
  return %pooled, %t, %p, %c, %o : tensor<?x128xf32>, tensor<?x2x1x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xui32>
}

func.func @f32_k3_d100(%k: tensor<?x100xf32>, %g: tensor<?x100xf32>, %ape: tensor<3x100xf32>,
    %iro: tensor<?xui32>, %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x3x100xf32>, %init: tensor<?x100xf32>, %pinit: tensor<?x100xf32>,
    %cinit: tensor<?xi32>, %oinit: tensor<?xui32>)
    -> (tensor<?x100xf32>, tensor<?x2x3x100xf32>, tensor<?x100xf32>, tensor<?xi32>, tensor<?xui32>) {
  %p, %c = kpool.ring_close kpool(3) head_dim(100)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x3x100xf32>, tensor<?x100xf32>, tensor<?x100xf32>, tensor<3x100xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x100xf32>, tensor<?xi32>)
      -> tensor<?x100xf32>, tensor<?xi32>
  %o = kpool.pool_offsets kpool(3) ins(%iro, %cl : tensor<?xui32>, tensor<?xui32>)
      outs(%oinit : tensor<?xui32>) -> tensor<?xui32>
  %pooled = kpool.compress kpool(3) head_dim(100)
      ins(%k, %g, %ape, %iro, %o, %cl
          : tensor<?x100xf32>, tensor<?x100xf32>, tensor<3x100xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x100xf32>) -> tensor<?x100xf32>
  %t = kpool.seed_tail kpool(3) head_dim(100)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x100xf32>, tensor<?x100xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x3x100xf32>) -> tensor<?x2x3x100xf32>
  return %pooled, %t, %p, %c, %o : tensor<?x100xf32>, tensor<?x2x3x100xf32>, tensor<?x100xf32>, tensor<?xi32>, tensor<?xui32>
}

func.func @f32_k2_d7(%k: tensor<?x7xf32>, %g: tensor<?x7xf32>, %ape: tensor<2x7xf32>,
    %iro: tensor<?xui32>, %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x2x7xf32>, %init: tensor<?x7xf32>, %pinit: tensor<?x7xf32>,
    %cinit: tensor<?xi32>, %oinit: tensor<?xui32>)
    -> (tensor<?x7xf32>, tensor<?x2x2x7xf32>, tensor<?x7xf32>, tensor<?xi32>, tensor<?xui32>) {
  %p, %c = kpool.ring_close kpool(2) head_dim(7)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x2x7xf32>, tensor<?x7xf32>, tensor<?x7xf32>, tensor<2x7xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x7xf32>, tensor<?xi32>)
      -> tensor<?x7xf32>, tensor<?xi32>
  %o = kpool.pool_offsets kpool(2) ins(%iro, %cl : tensor<?xui32>, tensor<?xui32>)
      outs(%oinit : tensor<?xui32>) -> tensor<?xui32>
  %pooled = kpool.compress kpool(2) head_dim(7)
      ins(%k, %g, %ape, %iro, %o, %cl
          : tensor<?x7xf32>, tensor<?x7xf32>, tensor<2x7xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x7xf32>) -> tensor<?x7xf32>
  %t = kpool.seed_tail kpool(2) head_dim(7)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x7xf32>, tensor<?x7xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x2x7xf32>) -> tensor<?x2x2x7xf32>
  return %pooled, %t, %p, %c, %o : tensor<?x7xf32>, tensor<?x2x2x7xf32>, tensor<?x7xf32>, tensor<?xi32>, tensor<?xui32>
}
