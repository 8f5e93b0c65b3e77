//===- Validation.cpp - host-side checks of kpool operands ----------------===//

#include "Validation.h"

#include <algorithm>
#include <cassert>
#include <sstream>

using namespace kpool;
using namespace kpool::detail;

/// The words of an expected extent that the kernels check too (their Extent
/// finding, kpool/ABI/StatusWord.h), from the part of a shape check's
/// description for that dimension ("head_dim", "batch + 1", ...); null for
/// words that name no such extent.
static const char *extentWords(const std::string &words) {
  static const std::pair<const char *, const char *> known[] = {
      {"head_dim", "head_dim"},
      {"kpool", "kpool"},
      {"2", "keys and gates"},
      {"batch", "one per request"},
      {"one per request", "one per request"},
      {"batch + 1", "one more than cache_lengths"},
      {"one more than cache_lengths", "one more than cache_lengths"}};
  for (auto &[text, said] : known)
    if (words == text)
      return said;
  return nullptr;
}

/// Part `index` of `what` split at " x " ("tokens x head_dim", 1:
/// "head_dim").
static std::string dimensionWords(const char *what, int64_t index) {
  std::string text(what);
  size_t begin = 0;
  for (int64_t i = 0; i < index; ++i) {
    size_t at = text.find(" x ", begin);
    if (at == std::string::npos)
      return "";
    begin = at + 3;
  }
  size_t end = text.find(" x ", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos
                                                     : end - begin);
}

/// A run-time extent that contradicts the op, named as the kernels' Extent
/// finding names it ("'k' dimension 1", kpool::statusWordError), with the
/// values: "'k' dimension 1 is 8, expected 4 (head_dim)".
static std::string extentMessage(const char *operand, int64_t dim,
                                 int64_t actual, int64_t expected,
                                 const char *words, bool atLeast = false) {
  return "'" + std::string(operand) + "' dimension " + std::to_string(dim) +
         " is " + std::to_string(actual) + ", expected " +
         (atLeast ? "at least " : "") + std::to_string(expected) + " (" +
         words + ")";
}

static std::string formatShape(const int64_t *sizes, int64_t rank) {
  std::ostringstream os;
  os << "[";
  for (int64_t i = 0; i < rank; ++i)
    os << (i ? ", " : "") << sizes[i];
  os << "]";
  return os.str();
}

Status Validator::shapeError(const char *name, const View &view,
                             const int64_t *expected, size_t expectedRank,
                             const char *what) {
  int64_t rank = static_cast<int64_t>(expectedRank);
  bool ok = view.rank == rank;
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t i = 0; ok && i < rank; ++i) {
    int64_t e = expected[i], size = view.sizes[i];
    ok = size >= 0 && (e < 0 || size == e);
    if (ok)
      overflow |= __builtin_mul_overflow(elements, size, &elements);
  }
  if (ok) {
    // A view's element offsets and byte sizes are 64-bit: more elements
    // than 2^60 (8 bytes each at most) cannot be addressed.
    if (overflow || elements > (int64_t(1) << 60))
      return error("'" + std::string(name) + "' has shape " +
                   formatShape(view.sizes, rank) +
                   ", more elements than a view can address (2^60)");
    if (elements > 0 && !view.data)
      return error("'" + std::string(name) + "' has no data pointer");
    return Status();
  }
  // Only a failure pays for the message. A wrong extent the kernels also
  // check gets their Extent finding's words.
  if (view.rank == rank) {
    for (int64_t i = 0; i < rank; ++i) {
      int64_t e = expected[i], size = view.sizes[i];
      const char *words = nullptr;
      if (e >= 0 && size >= 0 && size != e &&
          (words = extentWords(dimensionWords(what, i))))
        return error(extentMessage(name, i, size, e, words));
      if (size < 0 || (e >= 0 && size != e))
        break;
    }
  }
  std::ostringstream os;
  os << "'" << name << "' must have shape [";
  for (int64_t i = 0; i < rank; ++i)
    os << (i ? ", " : "")
       << (expected[i] < 0 ? std::string("?") : std::to_string(expected[i]));
  os << "] (" << what << "), got ";
  if (view.rank != rank)
    os << "rank " << view.rank;
  else
    os << formatShape(view.sizes, rank);
  return error(os.str());
}

Status Validator::tableShape(const char *name, const View &view,
                             const char *shape) {
  int64_t expected[KPOOL_MAX_RANK];
  size_t rank = 0;
  // Each dimension: 'D', 'K', a number, or any extent ('?', or a letter
  // naming an extent the op's operands share, which the op's own rules
  // check).
  for (const char *c = shape; *c && rank < KPOOL_MAX_RANK; ++rank) {
    const char *end = c;
    while (*end && *end != 'x')
      ++end;
    if (end - c == 1 && *c == 'D')
      expected[rank] = geometry.headDim;
    else if (end - c == 1 && *c == 'K')
      expected[rank] = geometry.kpool;
    else if (*c >= '0' && *c <= '9')
      for (expected[rank] = 0; c != end; ++c)
        expected[rank] = expected[rank] * 10 + (*c - '0');
    else
      expected[rank] = -1;
    c = *end ? end + 1 : end;
  }
  if (shapeMatches(view, expected, rank))
    return Status();
  std::string what = std::string(shape) + " in the kernel ABI";
  return shapeError(name, view, expected, rank, what.c_str());
}

Status Validator::batch(const char *name, const View &view, int64_t &batch) {
  if (Status s = shape(name, view, {-1}, "batch"); !s.ok())
    return s;
  batch = view.sizes[0];
  // Offsets are [B+1] and num_requests is 32-bit: a batch is smaller.
  if (batch > INT32_MAX)
    return error("'" + std::string(name) + "' has " + std::to_string(batch) +
                 " entries; a batch has at most 2^31 - 1 requests");
  return Status();
}

Status Validator::sameExtent(const char *nameA, const View &a,
                             const char *nameB, const View &b, int dim) {
  if (a.sizes[dim] == b.sizes[dim])
    return Status();
  // The kernels check gate's rows against k's (the only pair there is).
  if (dim == 0 && b.sizes[dim] >= 0 && a.sizes[dim] >= 0)
    return error(extentMessage(nameB, 0, b.sizes[dim], a.sizes[dim],
                               ("the rows of '" + std::string(nameA) + "'")
                                   .c_str()));
  return error("'" + std::string(nameB) + "' has " +
               std::to_string(b.sizes[dim]) + " rows, '" + nameA + "' has " +
               std::to_string(a.sizes[dim]));
}

Status Validator::ringWindow(const View &tail) {
  if (tail.sizes[2] >= geometry.kpool)
    return Status();
  return error(extentMessage("tail", 2, tail.sizes[2], geometry.kpool,
                             "kpool", /*atLeast=*/true));
}

Status Validator::length(const char *name, const View &view, int64_t length,
                         const char *what) {
  if (view.rank == 1 && view.sizes[0] == length) {
    if (length > 0 && !view.data)
      return error("'" + std::string(name) + "' has no data pointer");
    return Status();
  }
  if (const char *words = extentWords(what);
      words && view.rank == 1 && view.sizes[0] >= 0)
    return error(extentMessage(name, 0, view.sizes[0], length, words));
  return error("'" + std::string(name) + "' must have " +
               std::to_string(length) + " entries (" + what + "), got " +
               (view.rank == 1 ? formatShape(view.sizes, 1)
                               : "rank " + std::to_string(view.rank)));
}

Status Validator::numRequests(int32_t numRequests, int64_t batch) {
  if (numRequests >= 0 && numRequests <= batch)
    return Status();
  return error("num_requests = " + std::to_string(numRequests) +
               " is outside [0, " + std::to_string(batch) +
               "] (the batch size)");
}

namespace {

/// Which slots the current call's requests hold: an open-addressing set
/// of this thread's, sized by the requests (not by max_slots, which may
/// be huge) and reused across calls, whose entries are tagged with the call
/// that wrote them, so the duplicate check allocates nothing per call once
/// warm and clears nothing.
class SlotSet {
public:
  /// Starts a call that marks at most `count` slots.
  void begin(int64_t count) {
    size_t want = 16;
    while (want < size_t(count) * 2)
      want *= 2;
    if (entries.size() < want) {
      entries.assign(want, Entry{});
      epoch = 0;
    }
    mask = entries.size() - 1;
    if (++epoch == 0) {
      std::fill(entries.begin(), entries.end(), Entry{});
      epoch = 1;
    }
  }
  /// Marks `slot`; false when this call marked it before.
  bool mark(uint32_t slot) {
    size_t i = (uint64_t(slot) * 0x9E3779B97F4A7C15ull >> 32) & mask;
    for (;; i = (i + 1) & mask) {
      Entry &e = entries[i];
      if (e.epoch != epoch) {
        e = Entry{epoch, slot};
        return true;
      }
      if (e.slot == slot)
        return false;
    }
  }

private:
  struct Entry {
    uint32_t epoch = 0;
    uint32_t slot = 0;
  };
  std::vector<Entry> entries;
  size_t mask = 0;
  uint32_t epoch = 0;
};

} // namespace

Status Validator::requests(const RequestChecks &c) {
  assert(c.slotRequests <= c.rowRequests &&
         "slots are checked with their requests' rows");
  static thread_local SlotSet stamps;
  if (c.slotRequests > 0)
    stamps.begin(c.slotRequests);
  const uint64_t K = static_cast<uint64_t>(geometry.kpool);
  uint64_t total = 0;
  // Without pool_row_offsets (the fused step): the first request whose
  // pools reach past the rows of 'pooled', and the pools up to it (the
  // request the kernels' PooledCapacity finding names).
  int64_t pastCapacity = -1;
  uint64_t throughPast = 0;
  // The first request whose slot an earlier request holds. Reported last,
  // after every other finding: it is the one finding no kernel guard sees
  // (the status word cannot report it), so any other fault of the call is
  // the error, as the kernels would record it.
  int64_t duplicate = -1;
  for (int64_t b = 0; b < c.rowRequests; ++b) {
    uint32_t lo = c.iro[b], hi = c.iro[b + 1];
    if (lo > hi || hi > c.rows) {
      std::string req = "request " + std::to_string(b) + ": ";
      if (lo > hi)
        return error(req + "input_row_offsets[" + std::to_string(b + 1) +
                     "] = " + std::to_string(hi) +
                     " is below input_row_offsets[" + std::to_string(b) +
                     "] = " + std::to_string(lo) + " (rows reversed)");
      return error(req + "input_row_offsets[" + std::to_string(b + 1) +
                   "] = " + std::to_string(hi) + " reaches past the " +
                   std::to_string(c.rows) + " rows of 'k'");
    }
    if (b < c.slotRequests) {
      uint32_t slot = c.slots[b];
      auto field = [&] {
        return "request " + std::to_string(b) + ": slot_idx[" +
               std::to_string(b) + "] = " + std::to_string(slot);
      };
      if (slot >= c.maxSlots)
        return error(field() +
                     " is not below max_slots = " + std::to_string(c.maxSlots));
      // Two requests in one slot would race on the ring.
      if (!stamps.mark(slot) && duplicate < 0)
        duplicate = b;
    }
    if (!c.cache)
      continue;
    uint64_t count = completedPools(c.cache[b], hi - lo, K);
    total += count;
    if (!c.pro) {
      if (pastCapacity < 0 && total > uint64_t(c.pooledRows)) {
        pastCapacity = b;
        throughPast = total;
      }
      continue;
    }
    int64_t got = int64_t(c.pro[b + 1]) - int64_t(c.pro[b]);
    if (got != int64_t(count))
      return error("request " + std::to_string(b) + ": pool_row_offsets[" +
                   std::to_string(b + 1) + "] - pool_row_offsets[" +
                   std::to_string(b) + "] = " + std::to_string(got) +
                   ", but the request completes " + std::to_string(count) +
                   " pool(s) (cache_lengths[" + std::to_string(b) +
                   "] = " + std::to_string(c.cache[b]) + ", " +
                   std::to_string(hi - lo) + " tokens, kpool " +
                   std::to_string(geometry.kpool) + ")");
  }
  int64_t B = c.rowRequests;
  if (c.cache && c.pro) {
    if (B > 0 && c.pro[B] > c.pooledRows)
      return error("pool_row_offsets[" + std::to_string(B) +
                   "] = " + std::to_string(c.pro[B]) + " is past the " +
                   std::to_string(c.pooledRows) + " rows of 'pooled'");
  } else if (c.cache && pastCapacity >= 0) {
    return error("request " + std::to_string(pastCapacity) +
                 ": its pools reach past the " + std::to_string(c.pooledRows) +
                 " rows of 'pooled' (requests 0.." +
                 std::to_string(pastCapacity) + " complete " +
                 std::to_string(throughPast) + " pool(s), the call completes " +
                 std::to_string(total) + ")");
  }
  if (duplicate >= 0) {
    uint32_t slot = c.slots[duplicate];
    int64_t other = 0;
    while (c.slots[other] != slot)
      ++other;
    return error("request " + std::to_string(duplicate) + ": slot_idx[" +
                 std::to_string(duplicate) + "] = " + std::to_string(slot) +
                 " is also the slot of request " + std::to_string(other));
  }
  return Status();
}

Status Validator::cacheShapes(const View &keys, const View &scales,
                              const View &table, int64_t batch, bool fp8) {
  if (Status s = shape("cache_keys", keys, {-1, -1, geometry.headDim},
                       "pages x page_size x head_dim");
      !s.ok())
    return s;
  if (keys.sizes[1] < 1)
    return error("'cache_keys' has page_size " + std::to_string(keys.sizes[1]) +
                 " (dimension 1); a page holds at least one entry");
  if (fp8)
    if (Status s = shape("cache_scales", scales, {keys.sizes[0], keys.sizes[1]},
                         "pages x page_size, as 'cache_keys'");
        !s.ok())
      return s;
  return shape("block_table", table, {batch, -1}, "batch x pages per request");
}

Status Validator::cacheEntries(
    const View &table, int64_t pages, int64_t pageSize,
    const std::vector<std::pair<int64_t, int64_t>> &pools) {
  const int64_t width = table.sizes[1];
  auto tableAt = [&](int64_t b, int64_t i) {
    return static_cast<const uint32_t *>(
        table.data)[b * table.strides[0] + i * table.strides[1]];
  };
  // Each stored entry as (page * pageSize + row, index into `pools`),
  // sorted to find two pools in one entry: O(P log P) on flat integers,
  // the same order of work as reading the metadata. This thread's buffer,
  // reused: no allocation per call once warm.
  static thread_local std::vector<std::pair<uint64_t, size_t>> entries;
  entries.clear();
  for (size_t i = 0; i < pools.size(); ++i) {
    const int64_t b = pools[i].first, p = pools[i].second;
    // Only a failure builds a message.
    auto req = [&] { return "request " + std::to_string(b) + ": "; };
    int64_t index = p / pageSize;
    auto entry = [&] {
      return "block_table[" + std::to_string(b) + ", " +
             std::to_string(index) + "]";
    };
    if (index >= width)
      return error(req() + "pool " + std::to_string(p) + " goes to " + entry() +
                   ", past the table's " + std::to_string(width) +
                   " pages per request (page_size " +
                   std::to_string(pageSize) + ")");
    uint32_t page = tableAt(b, index);
    if (page == UINT32_MAX)
      return error(req() + "pool " + std::to_string(p) + " goes to " + entry() +
                   ", which is -1 (padding)");
    if (page >= pages)
      return error(req() + entry() + " = " + std::to_string(page) +
                   " is not below the cache's " + std::to_string(pages) +
                   " pages (pool " + std::to_string(p) + ")");
    entries.push_back(
        {uint64_t(page) * uint64_t(pageSize) + uint64_t(p % pageSize), i});
  }
  std::sort(entries.begin(), entries.end());
  for (size_t k = 1; k < entries.size(); ++k) {
    if (entries[k].first != entries[k - 1].first)
      continue;
    // Report the later of the two pools (in call order), as a map of
    // first writers would.
    size_t first = std::min(entries[k].second, entries[k - 1].second);
    size_t second = std::max(entries[k].second, entries[k - 1].second);
    auto [b, p] = pools[second];
    auto [other, otherPool] = pools[first];
    uint64_t page = entries[k].first / uint64_t(pageSize);
    return error("request " + std::to_string(b) + ": pool " +
                 std::to_string(p) + " goes to page " + std::to_string(page) +
                 " row " + std::to_string(p % pageSize) + ", which " +
                 (other == b ? "its pool " + std::to_string(otherPool)
                             : "request " + std::to_string(other)) +
                 " also writes in this call");
  }
  return Status();
}
