// Mask-building helpers: the dense tensors the usual tutorial functions (create_causal_mask,
// create_padding_mask, ...) build, in maskattn's polarity (allowed: 1 = may attend).
//
// Every rule here has a compact form in maskattn::Options (causal, key_lengths, window, segments)
// that is faster and needs no O(Lq*Lk) memory; these helpers are for code that already passes
// dense masks around, for composing a rule with something custom, and for interoperating with
// PyTorch / ONNX style masks. A mask built here, given as Options::allowed, gives exactly the same
// attention as the equivalent compact rule (tests/test_masks.cpp checks it).
//
//   std::vector<uint8_t> causal = maskattn::create_causal_mask(Lq, Lk);
//   maskattn::Options opt;
//   opt.allowed = maskattn::make_mask(causal.data(), 1, 1, Lq, Lk);   // == opt.causal = true
//
// Lengths follow the library's limit: sequence lengths are at most 2^23 (kMaxMaskLength).
// Bad arguments throw maskattn::ArgumentError naming the argument, with expected vs given;
// std::bad_alloc if the result cannot be allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "maskattn/maskattn.hpp"

namespace maskattn {

// The largest sequence length a helper accepts: the library's limit (maskattn.hpp).
inline constexpr int64_t kMaxMaskLength = kMaxSequenceLength;

// Causal mask, row-major [Lq, Lk]: allowed[i * Lk + j] = 1 iff j <= d(i), with the diagonal
// d(i) = i + (Lk - Lq) (Align::bottom_right, maskattn's default) or d(i) = i (Align::top_left,
// PyTorch is_causal). Use as allowed with shape [1, 1, Lq, Lk]; equals Options::causal with the
// same align when no key/query lengths are given (with lengths, the compact rule moves the diagonal
// to the valid lengths, a dense mask cannot).
std::vector<uint8_t> create_causal_mask(int64_t Lq, int64_t Lk, Align align = Align::bottom_right);

// Key padding mask, row-major [B, L] (use as allowed with shape [B, 1, 1, L]):
// allowed[b * L + j] = 1 iff j < lengths[b] (1 = valid key). Equals Options::key_lengths = lengths.
// Requires 0 <= lengths[b] <= L.
std::vector<uint8_t> create_padding_mask(const std::vector<int32_t>& lengths, int64_t L);

// Sliding-window mask, row-major [Lq, Lk]: allowed iff d(i) - left <= j <= d(i) + right, with d(i)
// as in create_causal_mask; -1 = unbounded on that side. Not causal by itself (right = 0 makes it
// causal). Equals Options::window = {left, right} with the same align. Requires left, right >= -1.
std::vector<uint8_t> create_window_mask(int64_t Lq, int64_t Lk, int64_t left, int64_t right,
                                        Align align = Align::bottom_right);

// Segment ids [L] for documents packed one after the other into a sequence of length L:
// document n (lengths[n] tokens) gets id n, the unused tail gets -1. Use the same ids for
// Options::query_segments and key_segments (self-attention over the packed sequence) to keep
// each document to itself. Note that tail positions share the id -1, so they attend each other:
// add key_lengths / query_lengths = sum(lengths) if the tail must attend nothing.
// Requires lengths[n] >= 0 and sum(lengths) <= L.
std::vector<int32_t> segments_from_lengths(const std::vector<int32_t>& lengths, int64_t L);

// Converts a PyTorch-polarity key padding mask (nonzero = IGNORE that key, as
// nn.MultiheadAttention's key_padding_mask) of n entries into maskattn's allowed polarity
// (1 = may attend): allowed[i] = ignore[i] == 0 ? 1 : 0. The shape is unchanged ([B, Lk] for
// PyTorch's key_padding_mask: use as allowed with shape [B, 1, 1, Lk]). ignore may be null only
// when n == 0.
std::vector<uint8_t> from_key_padding_mask(const uint8_t* ignore, size_t n);
inline std::vector<uint8_t> from_key_padding_mask(const std::vector<uint8_t>& ignore) {
  return from_key_padding_mask(ignore.data(), ignore.size());
}

// The additive form of an allowed mask (same shape): 0.0f where allowed (nonzero), -infinity
// where not. Used as Options::bias it gives the same attention as the mask used as
// Options::allowed (maskattn treats -inf as masked, including fully masked rows).
std::vector<float> to_additive_mask(const std::vector<uint8_t>& allowed);

}  // namespace maskattn
