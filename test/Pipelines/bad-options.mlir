// Option values the pipelines check themselves. Each used to crash the
// process (chip= segfaulted in upstream's target verification), stop it with
// "LLVM ERROR" (chip=sm_100a, features=+ptx60), only warn (chip=sm_1000,
// features=garbage) or print an error and still succeed (format=foo,
// cuda-toolkit=/nonexistent, which emitted PTX calling an unresolved
// __nv_expf). Now each fails cleanly with a message naming the option.
// `not` (without --crash) fails on a crash, so these also check that.

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="format=isa chip=" 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: kpool-lower-to-nvvm: chip='' is not an NVIDIA architecture LLVM knows

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="chip=sm_100a" 2>&1 | FileCheck %s --check-prefix=SM100A
// SM100A: features='+ptx80' selects PTX 8.0, but chip=sm_100a needs PTX 8.6 or later (e.g. features=+ptx86)

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="features=+ptx60" 2>&1 | FileCheck %s --check-prefix=PTX60
// PTX60: features='+ptx60' selects PTX 6.0, but chip=sm_90 needs PTX 7.8 or later

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="format=foo" 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: format='foo' is not one of isa (PTX text), bin (cubin), fatbin

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="format=isa cuda-toolkit=/nonexistent" 2>&1 | FileCheck %s --check-prefix=TOOLKIT
// TOOLKIT: cuda-toolkit='/nonexistent' is not a directory

// A toolkit without libdevice, exact exp asked for: an error, not PTX with
// an unresolved __nv_expf. With approximate-exp it is fine.
// RUN: rm -rf %t.toolkit && mkdir -p %t.toolkit
// RUN: not kpool-opt %s -kpool-lower-to-nvvm="format=isa cuda-toolkit=%t.toolkit" 2>&1 | FileCheck %s --check-prefix=LIBDEVICE
// LIBDEVICE: exact exp needs libdevice, but the CUDA toolkit '{{.*}}' has no nvvm/libdevice/libdevice.10.bc; point cuda-toolkit=<root> (or $CUDA_HOME) at a CUDA toolkit, or pass approximate-exp=true for MLIR's polynomial exp
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa cuda-toolkit=%t.toolkit approximate-exp=true" | FileCheck %s --check-prefix=APPROX
// APPROX: gpu.binary
// RUN: not kpool-opt %s -kpool-lower-to-nvvm="format=bin cuda-toolkit=%t.toolkit approximate-exp=true" 2>&1 | FileCheck %s --check-prefix=PTXAS
// PTXAS: format=bin runs ptxas, but the CUDA toolkit '{{.*}}' has no bin/ptxas

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="chip=sm_1000" 2>&1 | FileCheck %s --check-prefix=CHIP
// CHIP: chip='sm_1000' is not an NVIDIA architecture LLVM knows

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="features=garbage" 2>&1 | FileCheck %s --check-prefix=FEATURES
// FEATURES: features='garbage': expected a comma-separated list of PTX versions LLVM knows, +ptx32 ... +ptx90 (e.g. +ptx80), got 'garbage'

// RUN: not kpool-opt %s -kpool-lower-to-nvvm="opt-level=4" 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: opt-level must be in [0, 3], got 4

// RUN: not kpool-opt %s -kpool-lower-to-llvm="vector-size=-1" 2>&1 | FileCheck %s --check-prefix=VECTOR
// VECTOR: kpool-lower-to-llvm: vector-size must be 0 (scalar) or a positive number of channels, got -1

// Values that are fine: a newer chip with the PTX it needs.
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa chip=sm_100a features=+ptx86 approximate-exp=true" | FileCheck %s --check-prefix=GOOD
// GOOD: gpu.binary

func.func @offsets(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
                   %out: tensor<?xui32>) -> tensor<?xui32> {
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%out : tensor<?xui32>) -> tensor<?xui32>
  return %r : tensor<?xui32>
}
