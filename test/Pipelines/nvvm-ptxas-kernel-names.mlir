// REQUIRES: ptxas
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa approximate-exp=true bufferize=false" -o %t
// RUN: %python %kpool_src_root/utils/extract-ptx.py %t --ptxas %ptxas --no-extern | FileCheck %s

// Kernels are named after their function, spelled as PTX identifiers: a
// function name with characters PTX rejects (found by kpool-fuzz-ir: ptxas
// failed with "Parsing error near '.offsets_kpool_pool_offsets'") gets them
// replaced by '_', and one starting with a digit a leading '_'; names that
// then collide are made unique by outlining.

// CHECK-DAG: @pool_offsets_kpool_pool_offsets: ptxas ok
// CHECK-DAG: @pool_offsets__kpool_pool_offsets: ptxas ok
// CHECK-DAG: @_1pool_kpool_pool_offsets: ptxas ok
// CHECK-DAG: @pool_offsets_kpool_pool_offsets_0: ptxas ok

func.func @pool.offsets(%iro: memref<?xui32>, %cache: memref<?xui32>,
                        %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

func.func @"pool offsets!"(%iro: memref<?xui32>, %cache: memref<?xui32>,
                           %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

func.func @"1pool"(%iro: memref<?xui32>, %cache: memref<?xui32>,
                   %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

func.func @pool_offsets(%iro: memref<?xui32>, %cache: memref<?xui32>,
                        %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

// A launch the caller wrote itself, in such a function, is outlined under a
// PTX identifier as well.
// CHECK-DAG: @my_fn_kernel: ptxas ok
func.func @my.fn(%m: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%d, %e, %g) in (%u = %c1, %v = %c1, %w = %c1) {
    memref.store %f, %m[%c0] : memref<?xf32>
    gpu.terminator
  }
  return
}
