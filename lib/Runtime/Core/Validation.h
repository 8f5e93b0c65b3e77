//===- Validation.h - host-side checks of kpool operands --------*- C++ -*-===//
//
// Checks an op's operands before a kernel runs: shapes against the kernel
// set's geometry, then the metadata request by request. Messages name the
// op, the request and the field, e.g.
//   "compress: request 2: input_row_offsets[3] = 70 reaches past the 64
//    rows of 'k'".
// Metadata is read through a MetadataReader; it is host memory (a GPU call
// never reads device-resident metadata back).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_VALIDATION_H
#define KPOOL_LIB_RUNTIME_VALIDATION_H

#include "kpool/Runtime/Status.h"
#include "kpool/Runtime/View.h"

#include <functional>
#include <vector>

namespace kpool::detail {

/// Copies the `count` 32-bit elements of a 1-D view into host memory.
using MetadataReader =
    std::function<Status(const View &view, std::vector<uint32_t> &out)>;

/// The kernel set's geometry.
struct Geometry {
  int64_t headDim;
  int64_t kpool;
};

class Validator {
public:
  Validator(const char *op, Geometry geometry, MetadataReader reader)
      : op(op), geometry(geometry), read(std::move(reader)) {}

  /// Shape checks. `expected` holds -1 for a dimension of any size.
  Status shape(const char *name, const View &view,
               std::initializer_list<int64_t> expected, const char *what);
  /// A 1-D per-request operand (cache_lengths): its length is the batch
  /// size, below 2^31. Sets `batch`.
  Status batch(const char *name, const View &view, int64_t &batch);
  /// `a` and `b` have the same extent in dimension `dim`.
  Status sameExtent(const char *nameA, const View &a, const char *nameB,
                    const View &b, int dim);
  /// 1-D `view` has `length` entries (`what` explains the expectation).
  Status length(const char *name, const View &view, int64_t length,
                const char *what);

  /// Reads a metadata view.
  Status load(const View &view, std::vector<uint32_t> &out) {
    return read(view, out);
  }

  /// Per-request row checks: ordered and inside `rows` (k's rows).
  Status rows(const std::vector<uint32_t> &iro, int64_t batch, int64_t rows);
  /// `num_requests` in [0, batch].
  Status numRequests(int32_t numRequests, int64_t batch);
  /// Slots of the first `numRequests` requests: below `maxSlots`, distinct.
  Status slots(const std::vector<uint32_t> &slots, int32_t numRequests,
               int64_t maxSlots);
  /// `pro` has the differences of `expected` (the pool counts) and its
  /// rows fit in `pooledRows`.
  Status poolRows(const std::vector<uint32_t> &pro,
                  const std::vector<uint32_t> &expected,
                  const std::vector<uint32_t> &iro,
                  const std::vector<uint32_t> &cache, int64_t pooledRows);

  /// The pool-cache operands' shapes: `keys` [N, page_size, head_dim]
  /// with page_size >= 1, for FP8 `scales` [N, page_size], `table`
  /// [batch, ?].
  Status cacheShapes(const View &keys, const View &scales, const View &table,
                     int64_t batch, bool fp8);
  /// The entries the call stores, `pools` as (request, absolute pool id):
  /// each has a page index below the table's width `width`, a page there
  /// (not the -1 padding) below `pages`, and no two pools (of one request or
  /// of two) store into one entry. `tableAt(b, i)` reads the table (host
  /// memory), only at the entries the pools use.
  Status cacheEntries(const std::function<uint32_t(int64_t, int64_t)> &tableAt,
                      int64_t width, int64_t pages, int64_t pageSize,
                      const std::vector<std::pair<int64_t, int64_t>> &pools);

  /// The op, e.g. "compress".
  const char *opName() const { return op; }

  Status error(const std::string &message) {
    return Status::error(std::string(op) + ": " + message);
  }

private:
  const char *op;
  Geometry geometry;
  MetadataReader read;
};

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_VALIDATION_H
