// Seeds for kpool-fuzz-ir: kpool ops in loops, branches, nested modules,
// GPU kernels and launches, and hand-written kpool.pool_row rows.

func.func @loop(%n: index, %iro: memref<?xui32>, %cache: memref<?xui32>, %pro: memref<?xui32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>) outs(%pro : memref<?xui32>)
  }
  return
}
func.func @branch(%b: i1, %iro: memref<?xui32>, %cache: memref<?xui32>, %pro: memref<?xui32>) {
  cf.cond_br %b, ^a, ^c
^a:
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>) outs(%pro : memref<?xui32>)
  cf.br ^c
^c:
  return
}
func.func @tensor_in_loop(%n: index, %iro: tensor<?xui32>, %cache: tensor<?xui32>, %pro: tensor<?xui32>) -> tensor<?xui32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%p = %pro) -> tensor<?xui32> {
    %q = kpool.pool_offsets kpool(4) ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>) outs(%p : tensor<?xui32>) -> tensor<?xui32>
    scf.yield %q : tensor<?xui32>
  }
  return %r : tensor<?xui32>
}
// -----
module {
  module @inner {
    func.func @f(%iro: memref<?xui32>, %cache: memref<?xui32>, %pro: memref<?xui32>) {
      kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>) outs(%pro : memref<?xui32>)
      return
    }
  }
  gpu.module @g {
    gpu.func @k(%iro: memref<?xui32>, %cache: memref<?xui32>, %pro: memref<?xui32>) kernel {
      kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>) outs(%pro : memref<?xui32>)
      gpu.return
    }
  }
  func.func @already_on_gpu(%iro: memref<?xui32>, %cache: memref<?xui32>, %pro: memref<?xui32>) {
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1) threads(%d, %e, %f) in (%u = %c1, %v = %c1, %w = %c1) {
      kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>) outs(%pro : memref<?xui32>)
      gpu.terminator
    }
    return
  }
}
