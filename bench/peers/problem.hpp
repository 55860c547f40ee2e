// What every peer of the benchmark computes, and the interface the benchmark drives them through.
// Same contract as maskattn (docs/semantics.md) for the subset the benchmark uses: bhld layout,
// GQA (query head h reads kv head h / (Hq / Hkv)), Dv == D, default scale 1/sqrt(D), bottom-right
// causal diagonal d(i) = i + (kLen_b - Lq), key lengths, a boolean `allowed` mask [B, Hq, Lq, Lk].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace peers {

struct Problem {
  int B = 1, Hq = 1, Hkv = 1, Lq = 1, Lk = 1, D = 1;
  bool causal = false;
  std::vector<int32_t> key_lengths;  // [B] or empty: keys j >= key_lengths[b] are padding
  std::vector<uint8_t> allowed;      // [B, Hq, Lq, Lk] or empty: nonzero = may attend

  int group() const { return Hq / Hkv; }
  int key_length(int b) const { return key_lengths.empty() ? Lk : key_lengths[size_t(b)]; }
  // Keys j < row_end(b, i) pass the causal and length rules (the boolean mask aside).
  int row_end(int b, int i) const {
    const int n = key_length(b);
    if (!causal) return n;
    const int end = i + (n - Lq) + 1;
    return end < 0 ? 0 : (end > n ? n : end);
  }
  size_t q_size() const { return size_t(B) * Hq * Lq * D; }
  size_t kv_size() const { return size_t(B) * Hkv * Lk * D; }
};

// A peer implementation: set up once per case (buffers, primitives), then run many times on any
// copy of the inputs. `threads` is the number of threads the call may use (the peer applies it
// with its own library's setting).
class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::string name() const = 0;
  // Extra information for the log (library version, implementation picked), may be empty.
  virtual std::string detail() const { return {}; }
  virtual void run(int threads, const float* q, const float* k, const float* v, float* o) = 0;
};

// Each factory returns nullptr and sets *why when the peer is not built in or cannot run the case.
std::unique_ptr<Peer> make_openblas_peer(const Problem& p, std::string* why);
std::unique_ptr<Peer> make_eigen_peer(const Problem& p, std::string* why);
std::unique_ptr<Peer> make_dnnl_peer(const Problem& p, const std::vector<int>& thread_counts, std::string* why);

}  // namespace peers
