// REQUIRES: ptxas
// RUN: kpool-opt %s -kpool-lower-to-nvvm=format=isa -o %t
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t --ptxas %ptxas --no-extern | FileCheck %s
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t | FileCheck %s --check-prefix=PTX

// The ring window R >= kpool on the GPU: the ring ops with a dynamic window
// (what the runtime's and the ahead-of-time kernels take: one kernel for
// every R) and with a static window wider than kpool, lowered to PTX for
// sm_90 and assembled by ptxas.

// An extent can contradict the op at run time (e.g. the tail's second
// extent is not 2, or the metadata lengths disagree): then the _mismatch
// kernel writes closed_pool = -1 and zero rows.
// CHECK: @dynamic_window_kpool_ring_close: ptxas ok
// CHECK-NEXT: @dynamic_window_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @dynamic_window_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @dynamic_window_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @dynamic_window_kpool_seed_tail_strided: ptxas ok
// CHECK-NEXT: @static_window_kpool_ring_close: ptxas ok
// CHECK-NEXT: @static_window_kpool_ring_close_strided: ptxas ok
// CHECK-NEXT: @static_window_kpool_ring_close_mismatch: ptxas ok
// CHECK-NEXT: @static_window_kpool_seed_tail: ptxas ok
// CHECK-NEXT: @static_window_kpool_seed_tail_strided: ptxas ok
// CHECK-NOT: ptxas

// A dynamic window pays one remainder per request, none per position, and
// none at all when R == kpool (a power of two) at run time: the row is a
// mask there.
// PTX-LABEL: // ---- gpu.binary @dynamic_window_kpool_seed_tail
// PTX:       setp.ne.b64 {{.*}}, 4;
// PTX:       and.b64 {{.*}}, 3;
// PTX:       rem.u64
// PTX-NOT:   rem.u64
// PTX:       // ---- gpu.binary @dynamic_window_kpool_seed_tail_strided
// A static window of 6 rows: remainders by the constant (no division).
// PTX-LABEL: // ---- gpu.binary @static_window_kpool_ring_close
// PTX-NOT:   rem.u64
// PTX:       // ---- gpu.binary @static_window_kpool_ring_close_strided

func.func @dynamic_window(%tail: tensor<?x2x?x128xbf16>, %k: tensor<?x128xbf16>,
    %g: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %pinit: tensor<?x128xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x2x?x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>) {
  %p, %c = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  %t = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x?x128xbf16>) -> tensor<?x2x?x128xbf16>
  return %t, %p, %c : tensor<?x2x?x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>
}

func.func @static_window(%tail: tensor<?x2x6x128xbf16>, %k: tensor<?x128xbf16>,
    %g: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %cl: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %pinit: tensor<?x128xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x2x6x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>) {
  %p, %c = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x6x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  %t = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n) outs(%tail : tensor<?x2x6x128xbf16>) -> tensor<?x2x6x128xbf16>
  return %t, %p, %c : tensor<?x2x6x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>
}
