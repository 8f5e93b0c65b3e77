//===- Differential.h - what the differential drivers share -----*- C++ -*-===//
//
// What the differential drivers (test/Runtime) share: a configuration of
// the kernels, and operands that are one strided view of 2- or 4-byte
// elements in storage that starts and ends with canary elements, so that a
// write outside the view, or into its gaps, shows as a changed canary.
// Test-only.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_SUPPORT_DIFFERENTIAL_H
#define KPOOL_TEST_SUPPORT_DIFFERENTIAL_H

#include "Reference/Reference.h"

#include "kpool/ABI/View.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace kpool::test {

/// A configuration of the kernels: element type, head_dim D and kpool K.
struct Config {
  ElementType type;
  int64_t D; // head_dim
  int64_t K; // kpool
  std::string name() const {
    return std::string(elementTypeName(type)) + " D" + std::to_string(D) +
           " K" + std::to_string(K);
  }
  reference::Geometry geometry() const { return {type, D, K}; }
  int64_t esize() const { return elementTypeSize(type); }
};

/// Where a view sits in its storage. Empty strides: dense row-major.
struct Layout {
  std::vector<int64_t> strides;
  int64_t before = 11; // canary elements before the view's first element
  int64_t after = 13;  // canary elements after its last
};

/// The canary: a NaN for every float type, an unlikely value for integers.
inline uint32_t sentinel(int64_t esize) { return esize == 2 ? 0x7fa5u : 0x7fa5a5a5u; }

class Buffer {
public:
  int64_t esize = 4;
  int64_t rank = 1;
  int64_t sizes[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
  int64_t offset = 0; // storage element of index (0, ..., 0)
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> inView; // per storage element

  static Buffer make(int64_t esize, const std::vector<int64_t> &shape,
                     const Layout &layout = Layout()) {
    Buffer b;
    b.esize = esize;
    b.rank = int64_t(shape.size());
    int64_t stride = 1;
    for (int64_t d = b.rank - 1; d >= 0; --d) {
      b.sizes[d] = shape[d];
      b.strides[d] = layout.strides.empty() ? stride : layout.strides[d];
      stride *= shape[d];
    }
    int64_t span = 1;
    bool empty = false;
    for (int64_t d = 0; d < b.rank; ++d) {
      empty |= b.sizes[d] == 0;
      span += (b.sizes[d] - 1) * b.strides[d];
    }
    if (empty)
      span = 0;
    b.offset = layout.before;
    int64_t total = layout.before + span + layout.after + 1;
    b.bytes.resize(total * esize);
    b.inView.assign(total, 0);
    for (int64_t e = 0; e < total; ++e)
      b.setRaw(e, sentinel(esize));
    b.forEach([&](const int64_t *, int64_t e) { b.inView[e] = 1; });
    return b;
  }

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d = 0; d < rank; ++d)
      n *= sizes[d];
    return n;
  }
  int64_t storageElements() const { return int64_t(inView.size()); }

  View view() const {
    View v{};
    v.data = const_cast<uint8_t *>(bytes.data()) + offset * esize;
    v.rank = rank;
    for (int64_t d = 0; d < rank; ++d) {
      v.sizes[d] = sizes[d];
      v.strides[d] = strides[d];
    }
    return v;
  }

  uint32_t raw(int64_t e) const {
    if (esize == 2) {
      uint16_t h;
      std::memcpy(&h, &bytes[e * 2], 2);
      return h;
    }
    uint32_t u;
    std::memcpy(&u, &bytes[e * 4], 4);
    return u;
  }
  void setRaw(int64_t e, uint32_t x) {
    if (esize == 2) {
      uint16_t h = uint16_t(x);
      std::memcpy(&bytes[e * 2], &h, 2);
    } else {
      std::memcpy(&bytes[e * 4], &x, 4);
    }
  }

  int64_t storageIndex(std::initializer_list<int64_t> idx) const {
    int64_t e = offset, d = 0;
    for (int64_t i : idx)
      e += i * strides[d++];
    return e;
  }
  uint32_t at(std::initializer_list<int64_t> idx) const {
    return raw(storageIndex(idx));
  }
  void set(std::initializer_list<int64_t> idx, uint32_t x) {
    setRaw(storageIndex(idx), x);
  }

  /// Calls fn(index, storage element) for every element in row-major order.
  void forEach(const std::function<void(const int64_t *, int64_t)> &fn) const {
    if (numElements() == 0)
      return;
    int64_t idx[4] = {0, 0, 0, 0};
    while (true) {
      int64_t e = offset;
      for (int64_t d = 0; d < rank; ++d)
        e += idx[d] * strides[d];
      fn(idx, e);
      int64_t d = rank - 1;
      while (d >= 0 && ++idx[d] == sizes[d])
        idx[d--] = 0;
      if (d < 0)
        return;
    }
  }

  /// Element `i` of a dense view in row-major order.
  uint32_t get(int64_t i) const { return raw(offset + i); }

  /// The view's elements in row-major order.
  std::vector<uint32_t> dense() const {
    std::vector<uint32_t> out;
    forEach([&](const int64_t *, int64_t e) { out.push_back(raw(e)); });
    return out;
  }
  void fill(const std::vector<uint32_t> &values) {
    size_t i = 0;
    forEach([&](const int64_t *, int64_t e) { setRaw(e, values.at(i++)); });
  }
};

} // namespace kpool::test

#endif // KPOOL_TEST_SUPPORT_DIFFERENTIAL_H
