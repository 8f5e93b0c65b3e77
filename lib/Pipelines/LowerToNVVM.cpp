//===- LowerToNVVM.cpp - kpool to NVVM and a GPU binary -------------------===//
//
// The GPU pipeline: kpool ops -> structured IR (convert-kpool-to-linalg, the
// same lowering as the CPU path) -> gpu.launch (kpool-map-to-gpu) -> outlined
// kernels in NVVM, serialized by gpu-module-to-binary -> host code in the
// LLVM dialect. After kpool-map-to-gpu it follows the shape of upstream's
// gpu-lower-to-nvvm-pipeline (GPUToNVVMPipeline.cpp), which is not reused
// as a whole because it has no toolkit path option: without one, math.exp
// stays an unresolved __nv_expf in the PTX.
//
//===----------------------------------------------------------------------===//

#include "kpool/Pipelines/Pipelines.h"

#include "kpool/Conversion/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/OptimizeForNVVM.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

using namespace mlir;

std::string kpool::resolveCudaToolkitPath(StringRef option) {
  if (!option.empty())
    return option.str();
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (std::optional<std::string> path = llvm::sys::Process::GetEnv(var))
      if (!path->empty() && llvm::sys::fs::is_directory(*path))
        return *path;
  if (llvm::sys::fs::is_directory("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

void kpool::buildLowerToNVVMPipeline(OpPassManager &pm,
                                     const LowerToNVVMOptions &options) {
  // kpool -> gpu.launch over the structured IR.
  // Bufferization without deallocation: that makes a public function return
  // owned buffers, so each returned argument would get a bufferization.clone,
  // i.e. a host allocation and a host copy of device memory. The kernels
  // allocate nothing (kpool-map-to-gpu rejects host buffers), so there is
  // nothing to free.
  if (options.bufferize)
    buildBufferizationPipeline(pm, /*deallocate=*/false);
  // No canonicalization before the mapping: it would fold pool_offsets'
  // one-iteration parallel loop, whose scan must run on the device.
  pm.addPass(createConvertKPoolToLinalgPass());
  KPoolMapToGPUPassOptions mapOptions;
  mapOptions.vectorBytes = options.vectorBytes;
  mapOptions.blockSize = options.blockSize;
  // Without a toolkit there is no libdevice, and math.exp would stay an
  // unresolved __nv_expf call in the PTX: approximate it instead.
  std::string toolkit = resolveCudaToolkitPath(options.cudaToolkit);
  mapOptions.approximateExp = options.approximateExp || toolkit.empty();
  pm.addNestedPass<func::FuncOp>(createKPoolMapToGPUPass(mapOptions));
  // The scalar channel loops are already scf.for; this catches any other
  // linalg op a caller put next to the kpool ops.
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Outline (constants and descriptor queries sunk into the kernels first,
  // so they are not passed as parameters), then lower what host and device
  // share.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  target.cmdOptions = options.ptxasOptions;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertIndexToLLVMPassOptions indexOptions;
  indexOptions.indexBitwidth = 64;
  pm.addPass(createConvertIndexToLLVMPass(indexOptions));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Device: NVVM.
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createStripDebugInfoPass());
  ConvertGpuOpsToNVVMOpsOptions nvvmOptions;
  nvvmOptions.indexBitwidth = 64;
  gpuPm.addPass(createConvertGpuOpsToNVVMOps(nvvmOptions));
  gpuPm.addPass(LLVM::createNVVMOptimizeForTargetPass());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());

  // Host: gpu.launch_func and the descriptor arithmetic to LLVM, then the
  // kernels into a gpu.binary.
  pm.addPass(createGpuToLLVMConversionPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = toolkit;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}
