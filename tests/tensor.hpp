// The tests' strided tensor: a buffer and the strides of a logical [B, H, L, D] tensor inside it,
// with whatever padding around and between rows the maker chose (so reads or writes outside the
// view show up). No GoogleTest here: the fuzz harness (tests/fuzz) uses it too.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "maskattn/maskattn.hpp"

namespace maskattn_test {

// A buffer and the strides of a logical [B, H, L, D] tensor in it. Copyable: views are made on
// demand from the offset, so a copy never points into another Tensor's buffer.
struct Tensor {
  std::array<int64_t, 4> shape{0, 0, 0, 0};
  std::array<int64_t, 4> strides{0, 0, 0, 1};
  int64_t offset = 0;
  std::vector<float> buf;

  int64_t count() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  int64_t index(int64_t b, int64_t h, int64_t l, int64_t d) const {
    return offset + b * strides[0] + h * strides[1] + l * strides[2] + d * strides[3];
  }
  float& at(int64_t b, int64_t h, int64_t l, int64_t d) { return buf[index(b, h, l, d)]; }
  float at(int64_t b, int64_t h, int64_t l, int64_t d) const { return buf[index(b, h, l, d)]; }

  template <class T>
  maskattn::TensorView<T> make_view(T* base) const {
    maskattn::TensorView<T> t;
    t.data = base + offset;
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
    t.size = static_cast<int64_t>(buf.size()) - offset;
    return t;
  }
  maskattn::MutableTensor view() { return make_view<float>(buf.data()); }
  maskattn::ConstTensor cview() const { return make_view<const float>(buf.data()); }

  // Contents gathered into contiguous [B, H, L, D].
  std::vector<float> dense() const {
    std::vector<float> out;
    out.reserve(static_cast<size_t>(count()));
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t h = 0; h < shape[1]; ++h)
        for (int64_t l = 0; l < shape[2]; ++l)
          for (int64_t d = 0; d < shape[3]; ++d) out.push_back(at(b, h, l, d));
    return out;
  }
  // 1 for buffer elements the view addresses.
  std::vector<uint8_t> addressed() const {
    std::vector<uint8_t> a(buf.size(), 0);
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t h = 0; h < shape[1]; ++h)
        for (int64_t l = 0; l < shape[2]; ++l)
          for (int64_t d = 0; d < shape[3]; ++d) a[static_cast<size_t>(index(b, h, l, d))] = 1;
    return a;
  }
};

}  // namespace maskattn_test
