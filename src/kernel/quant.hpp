// The quantized KV-cache formats (q8, q4) and the key rotation, in scalar code: the one definition
// that appending (cache/kv_storage.hpp), read(), the prefill packing, the uniform policy's mean and the
// tests share. The decode kernel reads the same bytes with integer dot products (kernel/quant_dot.hpp).
//
// A row of n elements (one position of one K or V head) is split into blocks of 32 consecutive
// elements; the last block is zero-padded. The row is stored as
//   [block 0 values][block 1 values]...[scale 0][scale 1]...   (scales: float32, little-endian)
//   q8: 32 bytes per block, int8 q in [-127, 127], x = scale * q, scale = amax / 127;
//   q4: 16 bytes per block, element i < 16 in the low nibble of byte i and element i + 16 in its high
//       nibble, x = scale * (q - 8) with q in [0, 15], scale = -m / 8 where m is the block's element of
//       largest magnitude (so m itself is exact and the error is at most amax / 8, as in ggml's q4_0).
// Values first and scales after keep every block's values 16- or 32-byte aligned for vector loads.
// A block holding NaN or infinity gets scale NaN (and values 0): every element of it reads back NaN.
//
// Each cache dtype (maskattn/kv_types.inc) is a RowTraits entry below: its bytes per row, the element
// type the kernels load, element i and the whole row as float, and for the quantized ones the
// encoding of a block. with_kv_type is the one switch from a run-time KVType to them; the functions
// taking a KVType (stored_row_bytes, stored_element, quantize_row, row_to_float) go through it.
#pragma once

#include "base/arch_namespace.hpp"
#include "base/compiler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel/half.hpp"
#include "maskattn/maskattn.hpp"
#include "problem/key_source.hpp"  // kv_type_bits

namespace maskattn::detail {

constexpr int64_t kQuantBlock = 32;

inline int64_t quant_blocks(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }
inline int64_t quant_value_bytes(KVType t) { return kQuantBlock * kv_type_bits(t) / 8; }  // per block

inline namespace MASKATTN_KERNEL_NS {

// Nearest integer, halves away from zero (inline: libm's nearbyint is a call per element).
inline int round_to_int(float x) { return int(x + (x < 0 ? -0.5f : 0.5f)); }

// ---------------------------------------------------------------- per-dtype row traits

template <KVType T>
struct RowTraits;

// Every fact about a dtype is a member of its traits (or a column of maskattn/kv_types.inc):
//   Elem          what the kernels load
//   element(), to_float(), encode_row()   element i and the row as float; a row of floats into the
//                 dtype (appends)
//   kQuantized    blocks with scales (the layout at the top of this file; quantize(), scale())
//   kRawBits      whether an append may give the stored bits themselves (uint16_t of the 16-bit formats)
//   kDirect       whether the prefill kernel reads the stored rows as they are (else it converts tiles)
//   kRotateKeys   whether KeyRotation::automatic rotates keys of this dtype
template <>
struct RowTraits<KVType::float32> {
  static constexpr KVType kType = KVType::float32;
  static constexpr bool kQuantized = false, kRawBits = false, kDirect = true, kRotateKeys = false;
  using Elem = float;  // what the kernels load
  static int64_t row_bytes(int64_t n) { return 4 * n; }
  static float element(const void* row, int64_t, int64_t i) { return static_cast<const float*>(row)[i]; }
  static void to_float(const void* row, int64_t n, float* out) { std::memcpy(out, row, size_t(n) * 4); }
  static void encode_row(const float* x, int64_t n, void* out) { std::memcpy(out, x, size_t(n) * 4); }
};

// The 16-bit formats: Elem tells the kernels' loads (Simd<Arch>::load) which conversion the bits take.
template <KVType T, class E, float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Bits16RowTraits {
  static constexpr KVType kType = T;
  static constexpr bool kQuantized = false, kRawBits = true, kDirect = false, kRotateKeys = false;
  using Elem = E;
  static int64_t row_bytes(int64_t n) { return 2 * n; }
  static float element(const void* row, int64_t, int64_t i) { return ToFloat(static_cast<const uint16_t*>(row)[i]); }
  static void to_float(const void* row, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = ToFloat(static_cast<const uint16_t*>(row)[i]);
  }
  static void encode_row(const float* x, int64_t n, void* out) {
    auto* bits = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; ++i) bits[i] = FromFloat(x[i]);
  }
};
template <>
struct RowTraits<KVType::float16> : Bits16RowTraits<KVType::float16, uint16_t, half_bits_to_float, float_to_half_bits> {};
template <>
struct RowTraits<KVType::bfloat16> : Bits16RowTraits<KVType::bfloat16, Bf16, bf16_bits_to_float, float_to_bf16_bits> {};

// The quantized dtypes share the block layout at the top of this file. Format (the dtype's
// RowTraits) gives value(values, e), the integer element e of a block, and encode(), a finite
// block's values and scale; kRotateKeys, whether its keys are rotated by default.
template <KVType T, class Format>
struct QuantRowTraits {
  static constexpr KVType kType = T;
  static constexpr bool kQuantized = true, kRawBits = false, kDirect = false;
  static constexpr int64_t kValueBytes = kQuantBlock * kv_type_bits(T) / 8;  // per block
  using Elem = uint8_t;
  static int64_t row_bytes(int64_t n) { return quant_blocks(n) * (kValueBytes + 4); }
  // The scale of block blk of a row of n elements.
  static float scale(const uint8_t* row, int64_t n, int64_t blk) {
    float d;
    std::memcpy(&d, row + quant_blocks(n) * kValueBytes + 4 * blk, 4);
    return d;
  }
  static float element(const void* row, int64_t n, int64_t i) {
    const auto* r = static_cast<const uint8_t*>(row);
    const int64_t blk = i / kQuantBlock;
    return scale(r, n, blk) * float(Format::value(r + blk * kValueBytes, i % kQuantBlock));
  }
  // Block by block (the same products as element(), in loops the compiler vectorises: the prefill
  // kernel converts whole key tiles of a cache this way).
  static void to_float(const void* row, int64_t n, float* out) {
    const auto* r = static_cast<const uint8_t*>(row);
    for (int64_t blk = 0, i0 = 0; i0 < n; ++blk, i0 += kQuantBlock) {
      const float d = scale(r, n, blk);
      const uint8_t* values = r + blk * kValueBytes;
      const int64_t len = std::min<int64_t>(kQuantBlock, n - i0);
      for (int64_t e = 0; e < len; ++e) out[i0 + e] = d * float(Format::value(values, e));
    }
  }
  static void encode_row(const float* x, int64_t n, void* out) { quantize(x, n, static_cast<uint8_t*>(out)); }
  // Quantizes one row of n floats into `out` (row_bytes(n) bytes).
  static void quantize(const float* x, int64_t n, uint8_t* out) {
    const int64_t nb = quant_blocks(n);
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int64_t i0 = blk * kQuantBlock, len = std::min<int64_t>(kQuantBlock, n - i0);
      float amax = 0.0f, m = 0.0f;
      bool finite = true;
      for (int64_t i = 0; i < len; ++i) {
        const float v = x[i0 + i];
        if (!std::isfinite(v)) finite = false;
        if (std::fabs(v) > amax) { amax = std::fabs(v); m = v; }
      }
      uint8_t* values = out + blk * kValueBytes;
      std::memset(values, Format::kPadByte, size_t(kValueBytes));  // padding reads as 0
      const float d = finite ? Format::encode(x + i0, len, amax, m, values) : std::numeric_limits<float>::quiet_NaN();
      std::memcpy(out + nb * kValueBytes + 4 * blk, &d, 4);
    }
  }
};
// Finite input stays finite at both ends of float's range: a block near ±FLT_MAX gets a scale whose
// largest step (127·d, 8·d) does not round past FLT_MAX, and a block so small (below ~4e-37) that
// the reciprocal of its scale overflows divides instead (0 · inf would be NaN).

template <>
struct RowTraits<KVType::q8> : QuantRowTraits<KVType::q8, RowTraits<KVType::q8>> {
  static constexpr uint8_t kPadByte = 0;
  static constexpr bool kRotateKeys = false;
  static int value(const uint8_t* values, int64_t e) { return int8_t(values[e]); }
  // The len values of a finite block with largest magnitude amax; returns the scale.
  static float encode(const float* x, int64_t len, float amax, float, uint8_t* values) {
    float d = amax / 127.0f;
    while (!std::isfinite(d * 127.0f)) d = std::nextafter(d, 0.0f);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const bool by_inverse = std::isfinite(inv);
    for (int64_t i = 0; i < len; ++i) {
      const float r = by_inverse ? x[i] * inv : x[i] / amax * 127.0f;
      values[i] = uint8_t(int8_t(round_to_int(std::max(-127.0f, std::min(127.0f, r)))));
    }
    return d;
  }
};

// Element e < 16 in the low nibble of byte e, e >= 16 in the high nibble of byte e - 16.
template <>
struct RowTraits<KVType::q4> : QuantRowTraits<KVType::q4, RowTraits<KVType::q4>> {
  static constexpr uint8_t kPadByte = 0x88;
  static constexpr bool kRotateKeys = true;  // 4-bit keys lose outlier channels (docs/semantics.md, "Key rotation")
  static int value(const uint8_t* values, int64_t e) {
    const uint8_t byte = values[e % 16];
    return (e < 16 ? (byte & 15) : (byte >> 4)) - 8;
  }
  // m: the element of largest magnitude amax, which the scale keeps exact.
  static float encode(const float* x, int64_t len, float, float m, uint8_t* values) {
    const float d = m / -8.0f;  // |8·d| = |m|: never past FLT_MAX
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    const bool by_inverse = std::isfinite(inv);
    for (int64_t i = 0; i < len; ++i) {
      const float r = by_inverse ? x[i] * inv : x[i] / d;
      const int q = std::max(0, std::min(15, round_to_int(std::max(-9.0f, std::min(8.0f, r))) + 8));
      uint8_t& byte = values[i % 16];
      byte = i < 16 ? uint8_t((byte & 0xF0) | q) : uint8_t((byte & 0x0F) | (q << 4));
    }
    return d;
  }
};

// Marks with_kv_type and the functions given to it: inlined where they are used, the switch costs
// what one written out there would, and the compiler inlines the kernel around it as it would then.
#define MASKATTN_DISPATCH_INLINE MASKATTN_ALWAYS_INLINE

// f(RowTraits<t>{}): the one switch from a run-time dtype to its traits.
template <class F>
MASKATTN_DISPATCH_INLINE inline decltype(auto) with_kv_type(KVType t, F&& f) {
  switch (t) {
#define MASKATTN_KV_TYPE(name, bits) \
    case KVType::name: return f(RowTraits<KVType::name>{});
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  }
  return f(RowTraits<KVType::float32>{});  // not reached: dtypes are checked where a cache is made
}

// Bytes of one stored row of n elements.
inline int64_t stored_row_bytes(KVType t, int64_t n) {
  return with_kv_type(t, [n](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::row_bytes(n); });
}
inline bool is_quantized(KVType t) {
  return with_kv_type(t, [](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::kQuantized; });
}
// Whether an append may give the stored 16-bit values themselves (float16 halves, bfloat16 bits).
inline bool takes_raw_bits(KVType t) {
  return with_kv_type(t, [](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::kRawBits; });
}
// Whether the prefill kernel reads the dtype's stored rows in place (float32) or converts tiles.
inline bool reads_directly(KVType t) {
  return with_kv_type(t, [](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::kDirect; });
}
// Whether KeyRotation::automatic rotates keys of this dtype.
inline bool rotates_keys(KVType t) {
  return with_kv_type(t, [](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::kRotateKeys; });
}
// One row of n floats into the dtype's stored row at `out` (stored_row_bytes(t, n) bytes).
inline void encode_stored_row(KVType t, const float* x, int64_t n, void* out) {
  with_kv_type(t, [&](auto tr) MASKATTN_DISPATCH_INLINE { decltype(tr)::encode_row(x, n, out); });
}

// The scale of block blk of a quantized row of n elements.
inline float quant_scale(KVType t, const uint8_t* row, int64_t n, int64_t blk) {
  float d;
  std::memcpy(&d, row + quant_blocks(n) * quant_value_bytes(t) + 4 * blk, 4);
  return d;
}

// Element i of a stored row as float (no rotation undone).
inline float stored_element(KVType t, const void* row, int64_t n, int64_t i) {
  return with_kv_type(t, [&](auto tr) MASKATTN_DISPATCH_INLINE { return decltype(tr)::element(row, n, i); });
}

// Quantizes one row of n floats into `out` (stored_row_bytes(t, n) bytes; t quantized). q8 also
// serves the decode kernel's queries (the same block rule, so Q·Kᵀ multiplies two q8 blocks).
inline void quantize_row(KVType t, const float* x, int64_t n, uint8_t* out) {
  with_kv_type(t, [&](auto tr) MASKATTN_DISPATCH_INLINE {
    if constexpr (decltype(tr)::kQuantized) decltype(tr)::quantize(x, n, out);
  });
}

// ---------------------------------------------------------------- key rotation

// Length of the Hadamard blocks for a head dimension: the largest power of 2 dividing D, at most 256
// (1 = no rotation possible: odd D).
inline int64_t rotation_block(int64_t D) {
  int64_t n = 1;
  while (n < 256 && D % (n * 2) == 0) n *= 2;
  return n;
}
// The fixed random sign of channel i (a multiplicative hash: no table, the same in every build).
inline float rotation_sign(int64_t i) {
  return ((uint32_t(i) * 0x9E3779B1u) >> 15) & 1u ? -1.0f : 1.0f;
}
// The butterflies grow values by up to n before the final 1/sqrt(n): a block within a factor n of
// FLT_MAX is scaled by 1/n first and the normalisation by n more (both exact: powers of 2, the
// result bit for bit the same), so only results that really exceed float's range overflow.
inline void hadamard_inplace(float* x, int64_t n) {
  // Eight running maxima (the compiler vectorises them; one chain of max is a scalar loop).
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i8 = 0;
  for (; i8 + 8 <= n; i8 += 8)
    for (int k = 0; k < 8; ++k) lanes[k] = std::max(lanes[k], std::fabs(x[i8 + k]));
  float amax = 0.0f;
  for (int k = 0; k < 8; ++k) amax = std::max(amax, lanes[k]);
  for (; i8 < n; ++i8) amax = std::max(amax, std::fabs(x[i8]));
  float norm = 1.0f / std::sqrt(float(n));
  if (amax > std::numeric_limits<float>::max() / float(n)) {
    for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / float(n);
    norm *= float(n);
  }
  // The butterflies in the plain order's arithmetic (each stage's pairs are independent, so every
  // value is the same; only a NaN's sign and payload bits may differ): the first three stages
  // within each 8 values in registers,
  // then stages of h >= 8 eight pairs at a time, which the compiler vectorises (measured: the
  // scalar stages were half of preparing a query for a rotated cache).
  int64_t h = 1;
  if (n >= 8) {
    for (int64_t i = 0; i < n; i += 8) {
      float* v = x + i;
      const float b0 = v[0] + v[1], b1 = v[0] - v[1], b2 = v[2] + v[3], b3 = v[2] - v[3];  // h = 1
      const float b4 = v[4] + v[5], b5 = v[4] - v[5], b6 = v[6] + v[7], b7 = v[6] - v[7];
      const float c0 = b0 + b2, c2 = b0 - b2, c1 = b1 + b3, c3 = b1 - b3;  // h = 2
      const float c4 = b4 + b6, c6 = b4 - b6, c5 = b5 + b7, c7 = b5 - b7;
      v[0] = c0 + c4; v[4] = c0 - c4; v[1] = c1 + c5; v[5] = c1 - c5;  // h = 4
      v[2] = c2 + c6; v[6] = c2 - c6; v[3] = c3 + c7; v[7] = c3 - c7;
    }
    h = 8;
  }
  for (; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; j += std::min<int64_t>(h, 8))
        for (int64_t k = 0; k < std::min<int64_t>(h, 8); ++k) {  // h < 8 only when n < 8
          const float a = x[j + k], b = x[j + h + k];
          x[j + k] = a + b;
          x[j + h + k] = a - b;
        }
  for (int64_t i = 0; i < n; ++i) x[i] *= norm;
}
// x <- R x with R = H (blockwise, orthonormal) diag(signs): q·k = (Rq)·(Rk).
inline void rotate(float* x, int64_t D) {
  const int64_t n = rotation_block(D);
  for (int64_t i = 0; i < D; ++i) x[i] *= rotation_sign(i);
  for (int64_t i = 0; i < D; i += n) hadamard_inplace(x + i, n);
}
// x <- Rᵀ x (H is symmetric and orthonormal, so its own inverse). Reading a rotated row back, the
// quantization error can carry an element at the edge of float's range past it: such an element
// reads ±FLT_MAX (a stored row is finite or NaN, never infinite, so no real infinity is clamped).
inline void unrotate(float* x, int64_t D) {
  const int64_t n = rotation_block(D);
  for (int64_t i = 0; i < D; i += n) hadamard_inplace(x + i, n);
  constexpr float kMax = std::numeric_limits<float>::max();
  for (int64_t i = 0; i < D; ++i) {
    const float v = x[i] * rotation_sign(i);
    x[i] = std::isinf(v) ? std::copysign(kMax, v) : v;
  }
}

// A whole stored row as float, rotation undone when `rotated`.
inline void row_to_float(KVType t, const void* row, int64_t n, bool rotated, float* out) {
  with_kv_type(t, [&](auto tr) MASKATTN_DISPATCH_INLINE { decltype(tr)::to_float(row, n, out); });
  if (rotated) unrotate(out, n);
}

}  // namespace MASKATTN_KERNEL_NS
}  // namespace maskattn::detail
