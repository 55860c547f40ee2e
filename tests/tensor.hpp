// The tests' strided tensor: a buffer and the strides of a logical [B, H, L, D] tensor inside it,
// with whatever padding around and between rows the maker chose (so reads or writes outside the
// view show up), the storages the suites use (make_tensor: bhld, blhd, padded and misaligned,
// packed QKV) and a uniform fill from any generator. No GoogleTest here: the fuzz harness
// (tests/fuzz) uses it too.
#pragma once

#include <algorithm>
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

enum class Storage {
  bhld,         // contiguous [B, H, L, D]
  blhd,         // contiguous [B, L, H, D]
  padded_bhld,  // [B, H, L, D] order with gaps after every row, head and batch; misaligned start
  padded_blhd,  // [B, L, H, D] order with gaps after every head and row; misaligned start
  qkv_packed,   // one projection output [B, L, 3, H, D]; `slot` 0/1/2 picks Q, K or V in it
};

inline const char* storage_name(Storage s) {
  switch (s) {
    case Storage::bhld: return "bhld";
    case Storage::blhd: return "blhd";
    case Storage::padded_bhld: return "padded_bhld";
    case Storage::padded_blhd: return "padded_blhd";
    case Storage::qkv_packed: return "qkv_packed";
  }
  return "?";
}


// A tensor of logical shape [B, H, L, D] in the given storage; every element (padding included)
// starts as `fill`. `slot` is only used by qkv_packed (the other two slots are padding here).
inline Tensor make_tensor(Storage s, int64_t B, int64_t H, int64_t L, int64_t D, float fill,
                          int slot = 0) {
  Tensor t;
  t.shape = {B, H, L, D};
  int64_t total = 0;
  switch (s) {
    case Storage::bhld:
      t.strides = {H * L * D, L * D, D, 1};
      total = B * H * L * D;
      break;
    case Storage::blhd:
      t.strides = {L * H * D, D, H * D, 1};
      total = B * H * L * D;
      break;
    case Storage::padded_bhld: {
      const int64_t row = D + 3, head = L * row + 2, batch = H * head + 5;
      t.strides = {batch, head, row, 1};
      t.offset = 1;  // 4-byte aligned only: catches aligned loads
      total = B * batch + 7;
      break;
    }
    case Storage::padded_blhd: {
      const int64_t head = D + 1, row = H * head + 3, batch = L * row + 5;
      t.strides = {batch, head, row, 1};
      t.offset = 3;
      total = B * batch + 7;
      break;
    }
    case Storage::qkv_packed:
      t.strides = {L * 3 * H * D, D, 3 * H * D, 1};
      t.offset = slot * H * D;
      total = B * L * 3 * H * D;
      break;
  }
  t.buf.assign(static_cast<size_t>(t.offset + std::max<int64_t>(total, 0) + 1), fill);
  return t;
}

// Uniform random values in [lo, hi) in every element the view addresses, in (b, h, l, d) order,
// padding left as is. `gen` is any generator with uniform(lo, hi) (the tests' Rng, the fuzzer's).
template <class Gen>
void fill_uniform(Tensor& t, Gen& gen, float lo, float hi) {
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t h = 0; h < t.shape[1]; ++h)
      for (int64_t l = 0; l < t.shape[2]; ++l)
        for (int64_t d = 0; d < t.shape[3]; ++d) t.at(b, h, l, d) = gen.uniform(lo, hi);
}

}  // namespace maskattn_test
