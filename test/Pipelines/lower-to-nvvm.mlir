// REQUIRES: ptxas
// (ptxas stands for a CUDA toolkit: exact exp needs its libdevice.)
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false" | FileCheck %s
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false" -mlir-print-ir-after=convert-gpu-to-nvvm -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=NVVM
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false chip=sm_80 features=+ptx70 opt-level=2" | FileCheck %s --check-prefix=TARGET
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false fast-math=false" -mlir-print-ir-after=convert-gpu-to-nvvm -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=ACCURATE
// RUN: kpool-opt %s -kpool-lower-to-nvvm="format=isa fuse-step=false min-blocks-per-sm=2" -mlir-print-ir-after=convert-gpu-to-nvvm -mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=MINCTA

// kpool-lower-to-nvvm on the tensor form of the four ops (one call, in the
// spec's order): bufferized in place, one kernel per parallel loop (two for
// ops whose operands may have a non-unit innermost stride), each serialized
// into a gpu.binary; the host function is LLVM dialect around
// gpu.launch_func, which mlir-translate turns into mgpu* runtime calls.

// CHECK:       llvm.func @f(
// CHECK:         gpu.launch_func @f_kpool_ring_close::@f_kpool_ring_close blocks in ({{.*}}) threads in ({{.*}}) : i64 args(
// CHECK:         gpu.launch_func @f_kpool_ring_close_strided::@f_kpool_ring_close_strided
// CHECK:         gpu.launch_func @f_kpool_pool_offsets::@f_kpool_pool_offsets
// CHECK:         gpu.launch_func @f_kpool_compress::@f_kpool_compress
// CHECK:         gpu.launch_func @f_kpool_compress_strided::@f_kpool_compress_strided
// CHECK:         gpu.launch_func @f_kpool_seed_tail::@f_kpool_seed_tail
// CHECK:         gpu.launch_func @f_kpool_seed_tail_strided::@f_kpool_seed_tail_strided
// Nothing but LLVM and gpu.launch_func is left on the host: the kernels work
// on the caller's buffers (no gpu.alloc, no copies, no clones).
// CHECK-NOT:     {{ (scf|memref|arith|func|bufferization)\.|gpu\.(alloc|memcpy|launch )}}
// CHECK:         llvm.return
// CHECK-NEXT:  }
// Nine kernels: ring_close, compress and seed_tail twice (unit and general
// innermost stride), pool_offsets once, and for ring_close and pool_offsets
// the kernel that writes their defined outputs when an extent contradicts
// the op (the metadata lengths are dynamic).
// CHECK-COUNT-9: gpu.binary @f_kpool_{{[a-z_]+}} [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">, properties = {{.*}}, assembly = "
// CHECK-NOT:   gpu.binary

// The first kernel (ring_close, unit stride) as NVVM IR: 8 channels per lane,
// so one lane per row and 256 rows per block; 16-byte vector accesses. The
// operands it only reads are readonly (kpool-nvvm-readonly-noalias, after
// this point, makes them noalias too: ld.global.nc); fast-math
// (the default): exp as exp2 (libdevice's __nv_exp2f is ex2.approx.f32) and
// an approximate division. A grid-stride loop runs over the rows
// (nctaid.x), with ape loaded before it.
// NVVM-LABEL: gpu.module @f_kpool_ring_close [
// NVVM:         llvm.func @__nv_exp2f(f32) -> f32
// NVVM:         llvm.func @f_kpool_ring_close({{.*}}!llvm.ptr {llvm.readonly}{{.*}}) attributes {gpu.kernel, gpu.known_block_size = array<i32: 1, 256, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 1, 256, 1>}
// NVVM:           nvvm.read.ptx.sreg.ctaid.x
// NVVM:           nvvm.read.ptx.sreg.tid.y
// NVVM:           nvvm.read.ptx.sreg.nctaid.x
// NVVM:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<8xf32>
// NVVM:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<8xbf16>
// NVVM:           llvm.call @__nv_exp2f
// NVVM:           llvm.fdiv {{.*}} {fastmathFlags = #llvm.fastmath<afn>} : vector<8xf32>
// NVVM:           llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr
// The general-stride ring_close: scalar, 8 lanes, 32 rows per block.
// NVVM-LABEL: gpu.module @f_kpool_ring_close_strided [
// NVVM:         nvvm.maxntid = array<i32: 8, 32, 1>
// NVVM:           nvvm.read.ptx.sreg.tid.x
// NVVM-NOT:       vector<
// pool_offsets: one thread.
// NVVM-LABEL: gpu.module @f_kpool_pool_offsets [
// NVVM:         nvvm.maxntid = array<i32: 1, 1, 1>

// fast-math=false: libdevice's accurate expf and the IEEE division.
// ACCURATE-LABEL: gpu.module @f_kpool_ring_close [
// ACCURATE:         llvm.func @__nv_expf(f32) -> f32
// ACCURATE-NOT:     fastmath<afn>
// ACCURATE:         llvm.call @__nv_expf
// ACCURATE-NOT:     fastmath<afn>
// ACCURATE:         llvm.fdiv {{.*}} : vector<8xf32>
// ACCURATE-NOT:     fastmath<afn>
// ACCURATE:       gpu.module @f_kpool_ring_close_strided
// min-blocks-per-sm: the occupancy hint on every kernel.
// MINCTA-COUNT-7:   nvvm.minctasm = 2 : i32

// The default opt level (2) is not printed.
// TARGET-COUNT-7: #nvvm.target<chip = "sm_80", features = "+ptx70">

func.func @f(%k: tensor<?x8xbf16>, %g: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
             %iro: tensor<?xui32>, %pro: tensor<?xui32>, %cl: tensor<?xui32>,
             %init: tensor<?x8xbf16>, %tail: tensor<?x2x4x8xbf16>,
             %slots: tensor<?xi32>, %n: i32, %pinit: tensor<?x8xbf16>,
             %cinit: tensor<?xi32>, %oinit: tensor<?xui32>)
    -> (tensor<?x8xbf16>, tensor<?x2x4x8xbf16>, tensor<?x8xbf16>,
        tensor<?xi32>, tensor<?xui32>) {
  %p, %c = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %g, %ape, %iro, %cl, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xi32>)
      num_requests(%n) outs(%pinit, %cinit : tensor<?x8xbf16>, tensor<?xi32>)
      -> tensor<?x8xbf16>, tensor<?xi32>
  %o = kpool.pool_offsets kpool(4) ins(%iro, %cl : tensor<?xui32>, tensor<?xui32>)
      outs(%oinit : tensor<?xui32>) -> tensor<?xui32>
  %0 = kpool.compress kpool(4) head_dim(8)
      ins(%k, %g, %ape, %iro, %o, %cl
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %t = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %g, %iro, %cl, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xi32>)
      num_requests(%n) outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return %0, %t, %p, %c, %o : tensor<?x8xbf16>, tensor<?x2x4x8xbf16>,
      tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>
}
