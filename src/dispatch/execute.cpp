// One road from a validated problem to its results, for every entry point (attention(), a KV
// cache's attend): the target, fused RoPE, the kernel, or the float64 reference.
#include <memory>
#include <vector>

#include "dispatch/targets.hpp"
#include "kernel/quant.hpp"
#include "problem/rope.hpp"

namespace maskattn::detail {
namespace {

// What the reference reads: plain float K and V. A cache's rows of another dtype or its pages
// become its logical contents (dequantized, the key rotation undone), a ring's in its slots (the
// reference reads position j from slot(j)): memory follows what the cache holds, not the positions
// it has seen. Positions it no longer holds stay zero or hold newer rows (masked: never read).
// Lengths, sinks and `first` stay, for the cache's rules.
KeySource logical_keys(const KeySource& kv, std::vector<float> (&rows)[2]) {
  KeySource plain = kv;
  const int64_t slots = kv.ring ? kv.sink_tokens + kv.ring : kv.Lk;
  for (int s = 0; s < 2; ++s) {
    const bool key = s == 0;
    const int64_t width = key ? kv.D : kv.Dv;
    rows[s].assign(size_t(kv.B * kv.H * slots * width), 0.0f);
    for (int64_t b = 0; b < kv.B; ++b)
      for (int64_t h = 0; h < kv.H; ++h)
        for (int64_t j = 0; j < (kv.lengths ? kv.lengths[b] : kv.Lk); j = kv.holds(b, j) ? j + 1 : kv.first[b])
          row_to_float(key ? kv.k_type : kv.v_type, key ? kv.key_row(b, h, j) : kv.value_row(b, h, j), width,
                       key && kv.keys_rotated, rows[s].data() + ((b * kv.H + h) * slots + kv.slot(j)) * width);
  }
  plain.k = rows[0].data();
  plain.v = rows[1].data();
  plain.k_type = plain.v_type = KVType::float32;
  plain.keys_rotated = false;
  plain.k_pages = plain.v_pages = nullptr;
  plain.page_keys = plain.pages_per_seq = 0;
  plain.ks = {kv.H * slots * kv.D, slots * kv.D, kv.D};
  plain.vs = {kv.H * slots * kv.Dv, slots * kv.Dv, kv.Dv};
  return plain;
}

}  // namespace

void execute(Problem p, Target requested) {
  const Target t = resolve_target(requested);
  // Nothing to write (Dv = 0, no weights, no lse): done. Empty tensors may have any B and H
  // (q [2^40, 1, 1, 0] is valid), and visiting their rows would take days for no output.
  if (p.Dv == 0 && !p.weights && !p.lse) return;
  if (t != Target::reference) {
    std::unique_ptr<float[]> q_rope, k_rope;  // RoPE: rotated copies of Q (and K); the reference rotates its own
    apply_rope(p, q_rope, k_rope);
    return run_kernel(t, p);
  }
  std::vector<float> rows[2];
  if (!p.kv.dense_float()) p.kv = logical_keys(p.kv, rows);
  run_reference(p);
}

}  // namespace maskattn::detail
