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

#include "PipelineSteps.h"

#include <cstdio>

#include "kpool/Conversion/Passes.h"
#include "kpool/Conversion/KPoolToGPU/KPoolToGPU.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/OptimizeForNVVM.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <iterator>

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

namespace {
/// An architecture LLVM's NVPTX backend (LLVM 22) knows and the lowest PTX
/// version it accepts for it (times ten). LLVM warns and ignores an unknown
/// chip and stops the process ("LLVM ERROR") for a PTX version below the
/// minimum, so both are checked here first.
struct Chip {
  const char *name;
  int minPtx;
};
constexpr Chip kChips[] = {
    {"sm_20", 32},   {"sm_21", 32},   {"sm_30", 32},   {"sm_32", 40},
    {"sm_35", 32},   {"sm_37", 41},   {"sm_50", 40},   {"sm_52", 41},
    {"sm_53", 42},   {"sm_60", 50},   {"sm_61", 50},   {"sm_62", 50},
    {"sm_70", 60},   {"sm_72", 61},   {"sm_75", 63},   {"sm_80", 70},
    {"sm_86", 71},   {"sm_87", 74},   {"sm_88", 90},   {"sm_89", 78},
    {"sm_90", 78},   {"sm_90a", 80},  {"sm_100", 86},  {"sm_100a", 86},
    {"sm_100f", 88}, {"sm_101", 86},  {"sm_101a", 86}, {"sm_101f", 88},
    {"sm_103", 88},  {"sm_103a", 88}, {"sm_103f", 88}, {"sm_110", 90},
    {"sm_110a", 90}, {"sm_110f", 90}, {"sm_120", 87},  {"sm_120a", 87},
    {"sm_120f", 88}, {"sm_121", 88},  {"sm_121a", 88}, {"sm_121f", 88},
};
/// The PTX versions LLVM 22 knows (its `ptxNN` features).
constexpr int kPtxVersions[] = {32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64,
                                65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80,
                                81, 82, 83, 84, 85, 86, 87, 88, 90};

std::string ptxName(int version) {
  return std::to_string(version / 10) + "." + std::to_string(version % 10);
}

/// Whether `chip` (one of kChips) has the FP8 conversion instructions:
/// sm_89 and every later family.
bool hasHardwareFP8(const std::string &chip) {
  int number = 0;
  if (sscanf(chip.c_str(), "sm_%d", &number) != 1)
    return false;
  return number >= 89;
}

bool isFile(const std::string &path) {
  return llvm::sys::fs::exists(path) && !llvm::sys::fs::is_directory(path);
}

/// kpool-map-to-gpu's options in the pipeline.
mlir::kpool::KPoolMapToGPUPassOptions
mapToGPUOptions(const mlir::kpool::KPoolToNVVMPipelineOptions &options) {
  mlir::kpool::KPoolMapToGPUPassOptions mapOptions;
  mapOptions.vectorBytes = options.vectorBytes;
  mapOptions.blockSize = options.blockSize;
  // The standalone pipeline's functions hold only kpool's kernels on the
  // caller's device buffers: nothing may touch memory on the host. With
  // map-other-ops, kpool-device-buffers checks that once the other ops are
  // parallel loops and the buffers device buffers.
  mapOptions.checkHostAccess = !options.mapOtherOps;
  mapOptions.approximateExp = options.approximateExp;
  mapOptions.fastMath = options.fastMath;
  mapOptions.gridBlocks = options.gridBlocks;
  // The FP8 conversion instruction (cvt...e4m3x2) exists from sm_89 on;
  // older chips get the exact software conversion, the same codes.
  mapOptions.hardwareFP8 = hasHardwareFP8(options.chip);
  return mapOptions;
}
} // namespace

LogicalResult kpool::verifyLowerToNVVMOptions(const KPoolToNVVMPipelineOptions &options,
                                              std::string &error) {
  auto fail = [&](const std::string &message) {
    error = "kpool-lower-to-nvvm: " + message;
    return failure();
  };
  const std::string &chipName = options.chip;
  const Chip *chip =
      llvm::find_if(kChips, [&](const Chip &c) { return chipName == c.name; });
  if (chip == std::end(kChips))
    return fail("chip='" + chipName +
                "' is not an NVIDIA architecture LLVM knows (sm_20 ... "
                "sm_121f, e.g. sm_90 for Hopper)");

  int ptx = 0;
  SmallVector<StringRef> features;
  StringRef(options.features).split(features, ',', -1, /*KeepEmpty=*/false);
  for (StringRef feature : features) {
    feature = feature.trim();
    unsigned version = 0;
    if (!feature.consume_front("+ptx") || feature.getAsInteger(10, version) ||
        !llvm::is_contained(kPtxVersions, int(version)))
      return fail("features='" + options.features +
                  "': expected a comma-separated list of PTX versions "
                  "LLVM knows, +ptx32 ... +ptx90 (e.g. +ptx80), got '" +
                  feature.str() + "'");
    ptx = std::max(ptx, int(version));
  }
  if (ptx && ptx < chip->minPtx)
    return fail("features='" + options.features + "' selects PTX " +
                ptxName(ptx) + ", but chip=" + chipName + " needs PTX " +
                ptxName(chip->minPtx) + " or later (e.g. features=+ptx" +
                std::to_string(chip->minPtx) + ")");

  const std::string &format = options.format;
  if (format != "isa" && format != "bin" && format != "fatbin")
    return fail("format='" + format +
                "' is not one of isa (PTX text), bin (cubin), fatbin");
  if (options.optLevel < 0 || options.optLevel > 3)
    return fail("opt-level must be in [0, 3], got " +
                std::to_string(options.optLevel));
  std::string mapError;
  if (failed(verifyMapToGPUOptions(mapToGPUOptions(options), mapError)))
    return fail(mapError);
  if (options.minBlocksPerSM < 0 || options.minBlocksPerSM > 64)
    return fail("min-blocks-per-sm must be in [0, 64], got " +
                std::to_string(options.minBlocksPerSM));

  const std::string &explicitToolkit = options.cudaToolkit;
  if (!explicitToolkit.empty() && !llvm::sys::fs::is_directory(explicitToolkit))
    return fail("cuda-toolkit='" + explicitToolkit + "' is not a directory");
  std::string toolkit = resolveCudaToolkitPath(explicitToolkit);
  std::string where =
      toolkit.empty() ? std::string("no CUDA toolkit was found (cuda-toolkit "
                                    "is empty and $CUDA_HOME, $CUDA_PATH, "
                                    "$CUDA_ROOT, /usr/local/cuda do not exist)")
                      : "the CUDA toolkit '" + toolkit + "'";
  if (!options.approximateExp &&
      (toolkit.empty() || !isFile(toolkit + "/nvvm/libdevice/libdevice.10.bc")))
    return fail(
        "exact exp needs libdevice, but " + where +
        (toolkit.empty() ? "" : " has no nvvm/libdevice/libdevice.10.bc") +
        "; point cuda-toolkit=<root> (or $CUDA_HOME) at a CUDA toolkit, or "
        "pass approximate-exp=true for MLIR's polynomial exp (the CPU path's "
        "arithmetic; never chosen silently)");
  if (format != "isa") {
    for (const char *tool : {"ptxas", "fatbinary"}) {
      if (format == "bin" && StringRef(tool) == "fatbinary")
        continue;
      if (!toolkit.empty() ? isFile(toolkit + "/bin/" + tool)
                           : bool(llvm::sys::findProgramByName(tool)))
        continue;
      return fail("format=" + format + " runs " + tool + ", but " + where +
                  (toolkit.empty() ? " and it is not on PATH"
                                   : " has no bin/" + std::string(tool)) +
                  "; set cuda-toolkit=<root> or use format=isa");
    }
  }
  return success();
}

namespace {
/// Moves the contents of every gpu.module into the first and points the
/// launches there (option single-gpu-module): a module of many kernels is
/// then translated, linked with libdevice, assembled by ptxas and loaded
/// once instead of once per kernel. Symbols that clash (e.g. globals two
/// kernels' modules both cloned) are renamed first.
struct MergeGPUModules
    : public PassWrapper<MergeGPUModules, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MergeGPUModules)
  StringRef getArgument() const final { return "kpool-merge-gpu-modules"; }
  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(top.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    gpu::GPUModuleOp target = modules.front();
    SymbolTable targetSymbols(target);
    // (module, kernel) -> the kernel's name in the target.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> moved;
    unsigned counter = 0;
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules)) {
      SymbolTable sourceSymbols(source);
      for (Operation &op : llvm::make_early_inc_range(*source.getBody())) {
        auto name =
            op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
        if (!name)
          continue;
        StringAttr newName = name;
        while (targetSymbols.lookup(newName) ||
               (newName != name && sourceSymbols.lookup(newName)))
          newName = StringAttr::get(
              &getContext(), name.getValue() + "_" + std::to_string(counter++));
        if (newName != name) {
          if (failed(SymbolTable::replaceAllSymbolUses(&op, newName, source)))
            return signalPassFailure();
          SymbolTable::setSymbolName(&op, newName);
        }
        moved[{source.getNameAttr(), name}] = newName;
      }
      for (Operation &op : llvm::make_early_inc_range(*source.getBody())) {
        op.moveBefore(target.getBody(), target.getBody()->end());
        if (op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
          targetSymbols.insert(&op);
      }
    }
    top.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          moved.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == moved.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          target.getNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules))
      source.erase();
  }
};
} // namespace

LogicalResult kpool::buildLowerToNVVMPipeline(OpPassManager &pm,
                                              const KPoolToNVVMPipelineOptions &options,
                                              std::string *error) {
  if (failed(checkPipelineAnchor(pm, "kpool-lower-to-nvvm", error)))
    return failure();
  // kpool -> gpu.launch over the structured IR.
  // Bufferization without deallocation: that makes a public function return
  // owned buffers, so each returned argument would get a bufferization.clone,
  // i.e. a host allocation and a host copy of device memory. The kernels
  // allocate nothing (kpool-map-to-gpu rejects host buffers), so there is
  // nothing to free. The caller's other ops may allocate: with
  // map-other-ops their buffers are freed (in device memory).
  if (failed(beginPipeline(pm, options, verifyLowerToNVVMOptions,
                           /*deallocate=*/options.mapOtherOps, error)))
    return failure();
  // No canonicalization before the mapping: it would fold pool_offsets'
  // one-iteration parallel loop, whose scan must run on the device.
  pm.addPass(createConvertKPoolToLinalgPass());
  // verifyLowerToNVVMOptions made sure libdevice exists unless exp is
  // approximated (math.exp would otherwise stay an unresolved __nv_expf).
  std::string toolkit = resolveCudaToolkitPath(options.cudaToolkit);
  pm.addNestedPass<func::FuncOp>(
      createKPoolMapToGPUPass(mapToGPUOptions(options)));
  if (options.mapOtherOps) {
    // The caller's ops, by upstream's mapping: parallel loops, the
    // function's buffers in device memory (its host copies become parallel
    // loops too), then the loops tiled 8 x 32 (rows x channels; a 1-D loop
    // by 8), the innermost loop on threadIdx.x so that consecutive threads
    // touch consecutive elements. No canonicalization between the tiling
    // and the mapping: it would merge the tiled loops back.
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
    pm.addPass(createKPoolDeviceBuffersPass());
    OpPassManager &funcPm = pm.nest<func::FuncOp>();
    funcPm.addPass(createParallelLoopTilingPass({8, 32},
                                                /*noMinMaxBounds=*/true));
    GpuMapParallelLoopsPassOptions mapping;
    mapping.mappingPolicyStr = "innermost-first";
    funcPm.addPass(createGpuMapParallelLoopsPass(mapping));
    funcPm.addPass(createConvertParallelLoopToGpuPass());
  }
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
  // Device memory operations (the caller's, or map-other-ops's) only lower
  // on a stream; functions without any keep their synchronous launches.
  pm.addNestedPass<func::FuncOp>(createKPoolAsyncDeviceMemoryPass());
  if (options.singleGPUModule)
    pm.addPass(std::make_unique<MergeGPUModules>());
  // Read-only operands (for ld.global.nc) and the occupancy hint.
  KPoolGPUKernelAttrsPassOptions attrOptions;
  attrOptions.minBlocksPerSM = options.minBlocksPerSM;
  pm.addNestedPass<gpu::GPUModuleOp>(createKPoolGPUKernelAttrsPass(attrOptions));
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
  gpuPm.addPass(createKPoolNVVMReadOnlyNoAliasPass());
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
  return success();
}
