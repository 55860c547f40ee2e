// RoPE's cost on a KV-cache decode step (docs/semantics.md, "Rotary position embedding"): one query
// per head attends a resident cache created with and without `rope`, interleaved (each repetition
// runs both, in alternating order), median ms per step and their ratio. With rope, attend rotates the
// Lq x Hq query rows (Hq x D work); the keys were rotated when appended. Also one step of "append
// one token, then attend", where the append rotates Hkv key rows. Then attention() with and without
// rope, where each call rotates copies of Q and K: a decode call over 4096 keys and a 1024 x 1024
// prefill (GQA 32/8, D 128, causal). Last, appends alone per dtype: a prompt of 512 tokens and
// single tokens into 8 KV heads of 128, without rope, with rope and with llama3 scaling (each key
// row rotated, converted and written in one pass), in microseconds per token.
//
//   maskattn_rope_bench [--reps N] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <maskattn/maskattn.hpp>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Shape {
  const char* name;
  int Hq, Hkv, L, D;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 40, threads = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
  }
  // The tiny cache shows the rotation's own cost (attention over 16 keys is a few microseconds).
  const Shape shapes[] = {{"GQA 1x32/8x4096x128", 32, 8, 4096, 128}, {"MHA 1x32/32x2048x128", 32, 32, 2048, 128},
                          {"tiny 1x32/8x16x128", 32, 8, 16, 128}};
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::printf("target %s, %d thread(s), %d repetitions, median ms per step\n",
              maskattn::target_name(maskattn::best_target()), threads, reps);
  std::printf("%-22s %-8s %12s %12s %8s %16s %16s %8s\n", "shape", "kv", "attend", "attend+rope", "ratio",
              "append+attend", "... +rope", "ratio");
  for (const Shape& s : shapes)
    for (maskattn::KVType t : maskattn::kKVTypes) {
      maskattn::KVCacheConfig cfg;
      cfg.kv_heads = s.Hkv;
      cfg.capacity = s.L + 2 * reps + 8;
      cfg.head_dim = s.D;
      cfg.dtype = t;
      maskattn::KVCache plain(cfg);
      cfg.rope = maskattn::Rope{};
      cfg.rope->theta = 500000;
      maskattn::KVCache roped(cfg);
      std::vector<float> k(size_t(s.Hkv) * s.L * s.D), v(k.size());
      for (float& x : k) x = normal(gen);
      for (float& x : v) x = normal(gen);
      plain.append(maskattn::bhld(k.data(), 1, s.Hkv, s.L, s.D), maskattn::bhld(v.data(), 1, s.Hkv, s.L, s.D));
      roped.append(maskattn::bhld(k.data(), 1, s.Hkv, s.L, s.D), maskattn::bhld(v.data(), 1, s.Hkv, s.L, s.D));
      std::vector<float> q(size_t(s.Hq) * s.D), o(q.size()), k1(size_t(s.Hkv) * s.D), v1(k1.size());
      for (float& x : q) x = normal(gen);
      for (float& x : k1) x = normal(gen);
      for (float& x : v1) x = normal(gen);
      maskattn::Options opt = maskattn::KVCache::default_options();
      opt.threads = threads;
      const auto qv = maskattn::bhld(q.data(), 1, s.Hq, 1, s.D);
      const auto ov = maskattn::bhld(o.data(), 1, s.Hq, 1, s.D);
      auto attend = [&](const maskattn::KVCache& c) {
        const double t0 = now();
        c.attend(qv, ov, opt);
        return now() - t0;
      };
      auto step = [&](maskattn::KVCache& c) {
        const double t0 = now();
        c.append(maskattn::bhld(k1.data(), 1, s.Hkv, 1, s.D), maskattn::bhld(v1.data(), 1, s.Hkv, 1, s.D));
        c.attend(qv, ov, opt);
        return now() - t0;
      };
      for (int w = 0; w < 3; ++w) attend(plain), attend(roped);  // warm-up
      std::vector<double> a0, a1, s0, s1;
      for (int r = 0; r < reps; ++r) {
        if (r % 2) {
          a1.push_back(attend(roped));
          a0.push_back(attend(plain));
        } else {
          a0.push_back(attend(plain));
          a1.push_back(attend(roped));
        }
      }
      for (int r = 0; r < reps; ++r) {
        if (r % 2) {
          s1.push_back(step(roped));
          s0.push_back(step(plain));
        } else {
          s0.push_back(step(plain));
          s1.push_back(step(roped));
        }
      }
      const double ma0 = median(a0) * 1e3, ma1 = median(a1) * 1e3, ms0 = median(s0) * 1e3, ms1 = median(s1) * 1e3;
      std::printf("%-22s %-8s %12.4f %12.4f %8.3f %16.4f %16.4f %8.3f\n", s.name, maskattn::kv_type_name(t), ma0, ma1,
                  ma1 / ma0, ms0, ms1, ms1 / ms0);
    }
  std::printf("\nappend alone (8 KV heads x 128), median us per token: none / rope / rope + llama3 scaling\n");
  {
    const int Hkv = 8, D = 128, T = 512;
    std::vector<float> k(size_t(Hkv) * T * D), v(k.size());
    for (float& x : k) x = normal(gen);
    for (float& x : v) x = normal(gen);
    maskattn::Rope llama3{500000, 0, maskattn::RopeLayout::halves, 0, {}};
    llama3.scaling.type = maskattn::RopeScalingType::llama3;
    llama3.scaling.factor = 8;
    llama3.scaling.low_freq_factor = 1;
    llama3.scaling.high_freq_factor = 4;
    llama3.scaling.original_max_positions = 8192;
    for (maskattn::KVType t : maskattn::kKVTypes)
      for (const int n : {T, 1}) {
        std::vector<maskattn::KVCache> caches;
        for (int variant = 0; variant < 3; ++variant) {
          maskattn::KVCacheConfig cfg;
          cfg.kv_heads = Hkv;
          cfg.capacity = 64 * T;
          cfg.head_dim = D;
          cfg.dtype = t;
          if (variant == 1) cfg.rope = maskattn::Rope{500000, 0, maskattn::RopeLayout::halves, 0, {}};
          if (variant == 2) cfg.rope = llama3;
          caches.emplace_back(cfg);
        }
        std::vector<double> times[3];
        const int rounds = n == 1 ? 32 * reps : std::max(8, reps / 2);
        for (int r = 0; r < rounds; ++r)
          for (int variant = 0; variant < 3; ++variant) {
            maskattn::KVCache& c = caches[size_t((variant + r) % 3)];  // rotating order
            if (c.lengths()[0] + n > c.config().capacity) c.reset();
            const double t0 = now();
            // Single tokens come from a new place of the buffers each round ([L, H, D]): appending one
            // token's rows again and again lets the branch predictor learn the quantizers' branches
            // (q4 without rope looked 1.4x faster than with it that way, where a model's keys never repeat).
            const size_t at = size_t((n == 1 ? r % T : 0) * Hkv * D);
            c.append(maskattn::blhd(k.data() + at, 1, n, Hkv, D), maskattn::blhd(v.data() + at, 1, n, Hkv, D));
            times[(variant + r) % 3].push_back((now() - t0) / n);
          }
        std::printf("  %-8s %4d token%s: %8.3f %8.3f %8.3f  (rope %.2fx, scaled %.2fx)\n", maskattn::kv_type_name(t), n,
                    n == 1 ? " " : "s", median(times[0]) * 1e6, median(times[1]) * 1e6, median(times[2]) * 1e6,
                    median(times[1]) / median(times[0]), median(times[2]) / median(times[0]));
      }
  }
  std::printf("\nattention() (rotated copies of Q and K per call), median ms per call\n");
  for (const int Lq : {1, 1024}) {
    const int Hq = 32, Hkv = 8, Lk = Lq == 1 ? 4096 : 1024, D = 128;
    std::vector<float> q(size_t(Hq) * Lq * D), k(size_t(Hkv) * Lk * D), v(k.size()), o(q.size());
    for (float& x : q) x = normal(gen);
    for (float& x : k) x = normal(gen);
    for (float& x : v) x = normal(gen);
    maskattn::Options plain;
    plain.causal = true;
    plain.threads = threads;
    maskattn::Options roped = plain;
    roped.rope = maskattn::Rope{};
    auto call = [&](const maskattn::Options& opt) {
      const double t0 = now();
      maskattn::attention(maskattn::bhld(q.data(), 1, Hq, Lq, D), maskattn::bhld(k.data(), 1, Hkv, Lk, D),
                          maskattn::bhld(v.data(), 1, Hkv, Lk, D), maskattn::bhld(o.data(), 1, Hq, Lq, D), opt);
      return now() - t0;
    };
    const int n = Lq == 1 ? reps : std::max(3, reps / 40);
    std::vector<double> t0, t1;
    for (int r = 0; r < n; ++r) {
      t0.push_back(call(plain));
      t1.push_back(call(roped));
    }
    std::printf("1x%d/%dx%dx%dx%d: plain %.3f, rope %.3f, ratio %.2f\n", Hq, Hkv, Lq, Lk, D, median(t0) * 1e3,
                median(t1) * 1e3, median(t1) / median(t0));
  }
  return 0;
}
