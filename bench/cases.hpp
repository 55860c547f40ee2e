// The benchmark cases, shared by maskattn_bench (against peers) and maskattn_scaling (thread
// scaling): the same ids, shapes and masks as bench/js/common.mjs.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "peers/problem.hpp"

namespace bench {

struct CaseDef {
  std::string id, name;
  bool decode;  // memory-bound: report bandwidth instead of FLOP/s
  peers::Problem p;
  std::string mask;  // description of the masking
};

// A fast deterministic generator for inputs (uniform in [-1, 1)).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  float uniform() { return float(next() >> 40) * (2.0f / float(1 << 24)) - 1.0f; }
};

inline std::vector<CaseDef> make_cases() {
  auto dense = [](std::string id, std::string name, bool decode, int B, int Hq, int Hkv, int Lq, int Lk, int D,
                  bool causal, std::string mask) {
    CaseDef c;
    c.id = std::move(id);
    c.name = std::move(name);
    c.decode = decode;
    c.p.B = B; c.p.Hq = Hq; c.p.Hkv = Hkv; c.p.Lq = Lq; c.p.Lk = Lk; c.p.D = D;
    c.p.causal = causal;
    c.mask = std::move(mask);
    return c;
  };
  std::vector<CaseDef> cases;
  cases.push_back(dense("1", "dense 1x8x128x64", false, 1, 8, 8, 128, 128, 64, false, "none"));
  cases.push_back(dense("2", "causal 1x8x512x64", false, 1, 8, 8, 512, 512, 64, true, "causal"));
  cases.push_back(dense("3", "dense 1x12x1024x64", false, 1, 12, 12, 1024, 1024, 64, false, "none"));
  cases.push_back(dense("4", "causal 1x12x1024x64", false, 1, 12, 12, 1024, 1024, 64, true, "causal"));
  cases.push_back(dense("5", "decode 1x32x1x2048x128", true, 1, 32, 32, 1, 2048, 128, true,
                        "causal bottom-right (no effect at Lq=1)"));
  {
    CaseDef c = dense("6", "bool mask 2x4x64x32", false, 2, 4, 4, 64, 64, 32, false,
                      "random boolean allowed [B,H,L,L], ~50%, >= 1 key per row");
    Rng r(606);
    const peers::Problem& p = c.p;
    c.p.allowed.resize(size_t(p.B) * p.Hq * p.Lq * p.Lk);
    for (size_t row = 0; row < c.p.allowed.size() / size_t(p.Lk); ++row) {
      uint8_t* a = c.p.allowed.data() + row * size_t(p.Lk);
      int kept = 0;
      for (int j = 0; j < p.Lk; ++j) kept += (a[j] = uint8_t(r.next() >> 63));
      if (kept == 0) a[r.next() % uint64_t(p.Lk)] = 1;
    }
    cases.push_back(std::move(c));
  }
  cases.push_back(dense("7", "GQA decode 1x32/8x1x4096x128", true, 1, 32, 8, 1, 4096, 128, true,
                        "causal bottom-right (no effect at Lq=1)"));
  {
    CaseDef c = dense("8", "batched decode 8x32/8x1x4096x128 ragged", true, 8, 32, 8, 1, 4096, 128, true,
                      "key_lengths 512, 1024, ..., 4096 (capacity 4096)");
    for (int b = 0; b < 8; ++b) c.p.key_lengths.push_back(512 * (b + 1));
    cases.push_back(std::move(c));
  }
  cases.push_back(dense("9", "spec verify 1x32/8x4x2048x128 causal", true, 1, 32, 8, 4, 2048, 128, true,
                        "causal bottom-right"));
  cases.push_back(dense("10", "dense 1x12x1024x128", false, 1, 12, 12, 1024, 1024, 128, false, "none"));
  {
    // The encoder call people run most (sentence embeddings, MiniLM-sized batch): 16 sentences of
    // 16..128 tokens padded to 128, 12 heads of 32; every query row computed, padded keys masked.
    CaseDef c = dense("11", "encoder 16x12x128x32 ragged", false, 16, 12, 12, 128, 128, 32, false,
                      "key_lengths 16, 23, ..., 128 (evenly spread, padded to 128)");
    for (int b = 0; b < 16; ++b) c.p.key_lengths.push_back(int32_t(std::lround(16 + (128 - 16) * b / 15.0)));
    cases.push_back(std::move(c));
  }
  {
    // A padded batch of a short-sequence model (the "key padding" case: every sequence shorter than the batch's longest): 4 sequences of
    // 64..256 tokens padded to 256, 8 heads of 64.
    CaseDef c = dense("12", "key padding 4x8x256x64", false, 4, 8, 8, 256, 256, 64, false,
                      "key_lengths 64, 128, 192, 256 (padded to 256)");
    for (int b = 0; b < 4; ++b) c.p.key_lengths.push_back(64 + 64 * b);
    cases.push_back(std::move(c));
  }
  return cases;
}

// Allowed (query, key) pairs of the whole call, and the K+V bytes the call must read.
inline double allowed_pairs(const peers::Problem& p) {
  double pairs = 0;
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.Hq; ++h)
      for (int i = 0; i < p.Lq; ++i) {
        const int end = p.row_end(b, i);
        if (p.allowed.empty()) {
          pairs += end;
        } else {
          const uint8_t* a = p.allowed.data() + ((size_t(b) * p.Hq + h) * p.Lq + i) * p.Lk;
          for (int j = 0; j < end; ++j) pairs += a[j] != 0;
        }
      }
  return pairs;
}
inline double kv_bytes(const peers::Problem& p) {
  double keys = 0;
  for (int b = 0; b < p.B; ++b) keys += p.key_length(b);
  return keys * p.Hkv * p.D * sizeof(float) * 2;
}

}  // namespace bench
