//===- Validation.h - host-side checks of kpool operands --------*- C++ -*-===//
//
// Checks an op's operands before a kernel runs: shapes against the kernel
// set's geometry, then the metadata request by request. Messages name the
// op, the request and the field, e.g.
//   "compress: request 2: input_row_offsets[3] = 70 reaches past the 64
//    rows of 'k'".
// Metadata is read in place (class Metadata); it is host memory (a GPU call
// never reads device-resident metadata back).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_VALIDATION_H
#define KPOOL_LIB_RUNTIME_VALIDATION_H

#include "kpool/ABI/View.h"
#include "kpool/Runtime/Status.h"

#include <vector>

/// Returns the Status `expr` when it is an error.
#define KPOOL_TRY(expr)                                                        \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_.ok())                                                              \
      return s_;                                                               \
  } while (false)

namespace kpool::detail {

/// A 1-D metadata view (32-bit elements) in host memory, read in place:
/// validation copies nothing and allocates nothing.
class Metadata {
public:
  Metadata() = default;
  explicit Metadata(const View &view)
      : data(static_cast<const uint32_t *>(view.data)),
        stride(view.strides[0]) {}
  uint32_t operator[](int64_t i) const { return data[i * stride]; }
  explicit operator bool() const { return data != nullptr; }

private:
  const uint32_t *data = nullptr;
  int64_t stride = 0;
};

/// The pools a request with `cached` tokens before the call and `tokens`
/// new ones completes: floor((c + n) / K) - ceil(c / K), at least 0 (the
/// host's count, which host validation and the pool-cache checks use; the
/// kernels' is MetadataBuilder::poolRange).
inline uint64_t completedPools(uint64_t cached, uint64_t tokens,
                               uint64_t kpool) {
  uint64_t first = (cached + kpool - 1) / kpool,
           last = (cached + tokens) / kpool;
  return last > first ? last - first : 0;
}

/// What one pass over a call's requests checks (the metadata is host
/// memory; shapes were checked before).
struct RequestChecks {
  /// Requests [0, rowRequests): input_row_offsets ordered and inside the
  /// `rows` of `k`.
  Metadata iro;
  int64_t rowRequests = 0;
  int64_t rows = 0;
  /// Requests [0, slotRequests), at most rowRequests of them: slot_idx
  /// below `maxSlots` and distinct (a duplicate, which no kernel guard
  /// sees, is reported only when nothing else is wrong).
  Metadata slots;
  int64_t slotRequests = 0;
  int64_t maxSlots = 0;
  /// With `cache` (the rows of every request then checked): each request's
  /// pools are counted; with `pro`, its range there must be that count and
  /// pro[rowRequests] at most `pooledRows`; without (the fused step), the
  /// pools of requests 0..b must fit it for every b (the first request past
  /// it is named, as the kernels' PooledCapacity finding).
  Metadata cache;
  Metadata pro;
  int64_t pooledRows = 0;
};

/// The kernel set's geometry.
struct Geometry {
  int64_t headDim;
  int64_t kpool;
};

class Validator {
public:
  Validator(const char *op, Geometry geometry) : op(op), geometry(geometry) {}

  /// Shape checks. `expected` holds -1 for a dimension of any size. Inline:
  /// a call checks a dozen shapes, and only a failure leaves the header.
  Status shape(const char *name, const View &view,
               std::initializer_list<int64_t> expected, const char *what) {
    if (shapeMatches(view, expected.begin(), expected.size()))
      return Status();
    return shapeError(name, view, expected.begin(), expected.size(), what);
  }
  /// The shape a kernel ABI shape string gives (e.g. "TxD": 'D' head_dim,
  /// 'K' kpool, a number, else any extent: '?', or a letter naming an
  /// extent the op's operands share, which the op's rules check; see
  /// KernelABI.def).
  Status tableShape(const char *name, const View &view, const char *shape);
  /// A 1-D per-request operand (cache_lengths): its length is the batch
  /// size, below 2^31. Sets `batch`.
  Status batch(const char *name, const View &view, int64_t &batch);
  /// `a` and `b` have the same extent in dimension `dim`.
  Status sameExtent(const char *nameA, const View &a, const char *nameB,
                    const View &b, int dim);
  /// 1-D `view` has `length` entries (`what` explains the expectation).
  Status length(const char *name, const View &view, int64_t length,
                const char *what);

  /// The ring window of `tail` (dimension 2) is at least kpool.
  Status ringWindow(const View &tail);
  /// `num_requests` in [0, batch].
  Status numRequests(int32_t numRequests, int64_t batch);
  /// The per-request checks of `checks`, request by request in one pass:
  /// the first failing request is reported (a duplicate slot only when
  /// nothing else fails).
  Status requests(const RequestChecks &checks);

  /// The pool-cache operands' shapes: `keys` [N, page_size, head_dim]
  /// with page_size >= 1, for FP8 `scales` [N, page_size], `table`
  /// [batch, ?].
  Status cacheShapes(const View &keys, const View &scales, const View &table,
                     int64_t batch, bool fp8);
  /// The entries the call stores, `pools` as (request, absolute pool id):
  /// each has a page index below the width of `table` (the block table,
  /// host memory, read only at the entries the pools use), a page there
  /// (not the -1 padding) below `pages`, and no two pools (of one request or
  /// of two) store into one entry.
  Status cacheEntries(const View &table, int64_t pages, int64_t pageSize,
                      const std::vector<std::pair<int64_t, int64_t>> &pools);

  /// The op, e.g. "compress".
  const char *opName() const { return op; }

  Status error(const std::string &message) {
    return Status::error(std::string(op) + ": " + message);
  }

private:
  /// What shape() accepts: the rank and extents, at most 2^60 elements (a
  /// view's element offsets and byte sizes are 64-bit), and a data pointer
  /// when there are elements.
  static bool shapeMatches(const View &view, const int64_t *expected,
                           size_t rank) {
    if (view.rank != static_cast<int64_t>(rank))
      return false;
    int64_t elements = 1;
    for (size_t i = 0; i < rank; ++i) {
      int64_t e = expected[i], size = view.sizes[i];
      if (size < 0 || (e >= 0 && size != e) ||
          __builtin_mul_overflow(elements, size, &elements))
        return false;
    }
    return elements <= (int64_t(1) << 60) && (elements == 0 || view.data);
  }
  /// The error shape() returns when shapeMatches() fails.
  Status shapeError(const char *name, const View &view,
                    const int64_t *expected, size_t rank, const char *what);

  const char *op;
  Geometry geometry;
};

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_VALIDATION_H
