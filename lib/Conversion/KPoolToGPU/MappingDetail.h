//===- MappingDetail.h - what the plan and its application share -*- C++ -*-=//
//
// Internal to lib/Conversion/KPoolToGPU: the facts about channel ops and
// views that both deciding a kernel loop's mapping (Plan.cpp) and applying
// it (Launch.cpp, ChannelLoops.cpp, NVVM.cpp) use.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOGPU_MAPPINGDETAIL_H
#define KPOOL_LIB_CONVERSION_KPOOLTOGPU_MAPPINGDETAIL_H

#include "kpool/Conversion/KPoolToGPU/KPoolToGPU.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::kpool::gpu_mapping {

/// Widest access the hardware has per thread (ld.global.v4.b32).
inline constexpr int64_t kMaxAccessBytes = 16;
/// Threads of a warp.
inline constexpr int64_t kWarpSize = 32;

/// A 1-D linalg op over the channels of one row: the pooled-row generic,
/// and the fills and copies of zero rows and ring rows.
bool isChannelOp(Operation *op);

/// Bytes of one element of `type` (an integer or float type).
int64_t elementBytes(Type type);

/// The memref operands of a channel op.
SmallVector<Value> viewsOf(linalg::LinalgOp op);

/// Whether `v` is defined inside `region` (or a region nested in it).
bool definedIn(Value v, Region &region);

/// Collects into `roots` the memrefs defined outside `region` that `view`
/// may be a view of, through subviews, casts and selects; false when it
/// cannot tell. With `alignElems` > 0 it also requires every step to keep
/// the alignment of a row start: unit strides and an innermost offset that
/// is a static multiple of `alignElems` on the kept innermost dimension.
/// Then `view` is aligned to `alignElems` elements whenever each root
/// starts aligned and every stride of the root but the innermost is a
/// multiple of `alignElems`.
bool traceRoots(Value view, Region &region, SmallVectorImpl<Value> &roots,
                int64_t alignElems = 0, int depth = 0);

/// Whether `op` writes memory (or may: unknown effects count as writes).
bool mayWrite(Operation *op);

/// `name` with every character PTX identifiers do not allow replaced by '_'
/// (and a leading '_' before a digit).
std::string ptxIdentifier(std::string name);

/// Where a launch being built puts what does not depend on the row.
struct LaunchPoints {
  /// The launch; values defined outside its body are kernel-invariant.
  gpu::LaunchOp launch;
  /// Host-side point before the launch, where kernel-invariant checks go.
  Operation *host = nullptr;
  /// Point in the launch body before the loop over rows, where per-thread
  /// row-invariant values (preloaded `ape`) go.
  Operation *prefix = nullptr;
  /// The lane (`threadIdx.x`).
  Value lane;
};

/// Replaces each channel op of `plan` by its share of the row for `lane` of
/// `plan.lanes` lanes: vector loops where the views are aligned (checked on
/// the host for views of kernel operands, per row otherwise), scalar loops
/// otherwise (ChannelLoops.cpp).
LogicalResult distributeChannelOps(IRRewriter &rewriter,
                                   const KernelLoopPlan &plan,
                                   const LaunchPoints &points);

/// Replaces `op` by its row group's code (NVVM.cpp): the lanes that wrote
/// the entry's pooled row meet at a warp barrier, then exchange values by
/// `shfl.sync.bfly` within the group. With `hardwareFP8`, the FP8 codes by
/// `cvt.rn.satfinite.e4m3x2.f32`.
void distributeCacheEntry(IRRewriter &rewriter, CacheEntryOp op,
                          gpu::LaunchOp launch, Value lane, int64_t lanes,
                          bool hardwareFP8);

} // namespace mlir::kpool::gpu_mapping

#endif // KPOOL_LIB_CONVERSION_KPOOLTOGPU_MAPPINGDETAIL_H
