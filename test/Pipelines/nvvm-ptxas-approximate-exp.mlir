// REQUIRES: ptxas
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa approximate-exp=true bufferize=false" -o %t
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t --ptxas %ptxas --no-extern | FileCheck %s
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t | FileCheck %s --check-prefix=PTX

// approximate-exp: exp by MLIR's polynomial approximation (the CPU path's
// arithmetic) instead of libdevice; nothing to link, nothing unresolved.

// CHECK:      @compress_kpool_compress: ptxas ok
// CHECK-NEXT: @compress_kpool_compress_strided: ptxas ok

// PTX-LABEL: // ---- gpu.binary @compress_kpool_compress
// PTX:       ld.global.nc.v4.b32
// PTX-NOT:   ex2.approx
// PTX-NOT:   .extern
// PTX:       st.global.v4.b32

!kv = memref<?x128xbf16, strided<[?, ?], offset: ?>>
!ape = memref<4x128xf32, strided<[?, ?], offset: ?>>
!meta = memref<?xui32, strided<[?], offset: ?>>
func.func @compress(%k: !kv, %g: !kv, %ape: !ape, %iro: !meta, %pro: !meta,
                    %cache: !meta, %out: !kv) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, !ape, !meta, !meta, !meta)
      outs(%out : !kv)
  return
}
