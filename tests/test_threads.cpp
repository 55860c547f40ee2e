// Threads: the library called from several application threads at once, on shared inputs and a
// shared KV cache (attend is const), with and without its own worker pool; results bitwise equal
// whatever the number of threads (1, 2, 3, 8) on problems that really split. Native only (the
// WebAssembly test builds' threads are a fixed pool of workers); scripts/test.sh also runs this
// file's tests, with the thread-count invariance tests, under ThreadSanitizer (build/tsan).
#include <gtest/gtest.h>

#if !defined(__EMSCRIPTEN__)  // WebAssembly's pthreads come from a fixed pool of workers: not here

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "test_support.hpp"
#include "thread_cases.hpp"

namespace {

using maskattn::ConstTensor;
using maskattn::KVCache;
using maskattn::Options;

using maskattn_test::bitwise_equal;
using Inputs = maskattn_test::ThreadInputs;
using Shape = maskattn_test::ThreadShape;
using maskattn_test::available_targets;
using maskattn_test::lcg_values;

// Problems that split across threads: decode-shaped with several key chunks, prefill-shaped with
// several query blocks per head, and a masked one.
const Shape kShapes[] = {
    {"decode_long_keys", 1, 8, 2, 2, 2600, 32, 32, true, 0},
    {"prefill_blocks", 1, 4, 4, 200, 200, 32, 32, true, 0},
    {"gqa_window", 2, 4, 2, 40, 700, 16, 24, false, 37},
};

// 1, 2, 3 and 8 threads give the same bits, every kernel, every target; the problems really split.
TEST(Threads, ThreadCountDoesNotChangeResultsAnyKernel) {
  for (const Shape& shape : kShapes) {
    const Inputs in(shape);
    for (auto t : available_targets())
      for (auto kernel : maskattn_test::forced_kernels()) {
        const std::vector<float> one = in.run(t, kernel, 1);
        for (int threads : {2, 3, 8}) {
          maskattn::Stats stats;
          const std::vector<float> many = in.run(t, kernel, threads, nullptr, &stats);
          EXPECT_GE(stats.threads_used, 2) << shape.name << " must really split";
          EXPECT_TRUE(bitwise_equal(one, many)) << shape.name << " " << maskattn::target_name(t) << " "
                                                << maskattn::kernel_name(kernel) << ": " << threads << " threads";
        }
      }
  }
}

// Few (batch, kv head, query block) units over many keys (speculative verification: 2 KV heads of
// 16 rows, 4 query heads x 4 tokens, over 2600 keys): the prefill kernel splits the keys in chunks
// of 512 by the shape alone, so more threads than units work, with the 1-thread bits, and the
// split visits the same tiles (Stats) as the smallest chunks of prefill_split.
TEST(Threads, PrefillSplitsKeysWhenUnitsAreFew) {
  const Shape shape{"verify_long_context", 1, 8, 2, 4, 2600, 32, 32, true, 0};
  const Inputs in(shape);
  for (auto t : available_targets()) {
    maskattn::Stats one_stats;
    const std::vector<float> one = in.run(t, maskattn::Kernel::prefill, 1, nullptr, &one_stats);
    maskattn::Stats stats;
    const std::vector<float> many = in.run(t, maskattn::Kernel::prefill, 4, nullptr, &stats);
    EXPECT_EQ(stats.threads_used, 4) << maskattn::target_name(t) << ": 2 (b, kv head) units, 6 key chunks each";
    EXPECT_TRUE(bitwise_equal(one, many)) << maskattn::target_name(t);
    maskattn::Stats smallest;
    in.run(t, maskattn::Kernel::prefill_split, 3, nullptr, &smallest);
    EXPECT_EQ(smallest.tiles_skipped, one_stats.tiles_skipped) << maskattn::target_name(t);
    EXPECT_EQ(smallest.tiles_full + smallest.tiles_mixed, one_stats.tiles_full + one_stats.tiles_mixed)
        << maskattn::target_name(t);
  }
}

// Past 16,384 keys both kernels cut longer chunks (at most about 32 a group, so the partial rows
// held until the merge stay small): 20,000 keys give chunks of 1,024. Both match the float64
// reference, and 3 threads give the 1-thread bits.
TEST(Threads, VeryLongKeysSplitInLongerChunks) {
  const Shape shape{"very_long_keys", 1, 4, 1, 1, 20000, 16, 16, true, 0};
  const Inputs in(shape);
  const maskattn_test::CaseReferences ref = in.c.run_reference(in.inputs, {maskattn_test::DOrder::reversed});
  ASSERT_TRUE(ref.ok);
  for (auto t : available_targets())
    for (auto kernel : {maskattn::Kernel::decode, maskattn::Kernel::prefill}) {
      SCOPED_TRACE(std::string(maskattn::target_name(t)) + " " + maskattn::kernel_name(kernel));
      const maskattn_test::CaseRun one = in.c.run_kernel(in.inputs, in.options(t, kernel, 1));
      EXPECT_TRUE(maskattn_test::compare_to_reference("O", one.out.dense(), ref.fp64.out, ref.fp32.out,
                                                      {1, 4, 1, 16}, maskattn_test::Tolerance{}));
      EXPECT_TRUE(bitwise_equal(in.run(t, kernel, 1), in.run(t, kernel, 3)));
    }
}

// Many short (batch, head) problems in one call, the encoder shape (sentence embeddings: 16
// sentences of ragged length, a few heads): the (batch, kv head) units are handed out longest
// first, and whatever the order and the thread count the bits are the 1-thread ones, with the
// weights and lse too.
TEST(Threads, ManyShortHeadsRaggedBatchSplitsAndStaysBitwise) {
  const int64_t B = 16, Hq = 4, Hkv = 2, L = 40, D = 16;
  const std::vector<float> q = lcg_values(size_t(B * Hq * L * D), 11), k = lcg_values(size_t(B * Hkv * L * D), 12),
                           v = lcg_values(size_t(B * Hkv * L * D), 13);
  std::vector<int32_t> lengths;
  for (int64_t b = 0; b < B; ++b) lengths.push_back(int32_t(3 + (b * 7) % int64_t(L - 2)));  // 3..40, unordered
  auto run = [&](maskattn::Target t, maskattn::Kernel kernel, int threads, maskattn::Stats* stats) {
    const int64_t no = B * Hq * L * D, nw = B * Hq * L * L, nl = B * Hq * L;
    std::vector<float> r(size_t(no + nw + nl));
    maskattn::ExtraOutputs extra;
    extra.weights = r.data() + no;
    extra.lse = r.data() + no + nw;
    Options o;
    o.key_lengths = lengths;
    o.target = t;
    o.kernel = kernel;
    o.threads = threads;
    o.stats = stats;
    maskattn::attention(maskattn::bhld<const float>(q.data(), B, Hq, L, D), maskattn::bhld<const float>(k.data(), B, Hkv, L, D),
                        maskattn::bhld<const float>(v.data(), B, Hkv, L, D), maskattn::bhld(r.data(), B, Hq, L, D), o, extra);
    return r;
  };
  for (auto t : available_targets())
    for (auto kernel : {maskattn::Kernel::prefill, maskattn::Kernel::automatic}) {
      const std::vector<float> one = run(t, kernel, 1, nullptr);
      for (int threads : {2, 3, 8}) {
        maskattn::Stats stats;
        EXPECT_TRUE(bitwise_equal(one, run(t, kernel, threads, &stats)))
            << maskattn::target_name(t) << " " << maskattn::kernel_name(kernel) << ": " << threads << " threads";
        EXPECT_GE(stats.threads_used, 2) << "a batch of short problems must really split";
      }
    }
}

// Several application threads call attention() at once on the same inputs, each asking for the
// library's own threads too (one job runs in the pool at a time; the others run inline): every
// result is bitwise the single-threaded one.
TEST(Threads, ConcurrentCallsOnSharedInputs) {
  const Inputs in(kShapes[0]);
  const Inputs other(kShapes[2]);
  const auto t = maskattn::best_target();
  const std::vector<float> expected = in.run(t, maskattn::Kernel::automatic, 1);
  const std::vector<float> expected_other = other.run(t, maskattn::Kernel::automatic, 1);
  const maskattn_test::ConcurrentCalls calls = maskattn_test::run_concurrently(4, 6, [&](int c, int n) {
    const bool mine = (c + n) % 2 == 0;
    const std::vector<float> r = mine ? in.run(t, maskattn::Kernel::automatic, 1 + (c + n) % 4)
                                      : other.run(t, maskattn::Kernel::automatic, 1 + n % 3);
    return bitwise_equal(r, mine ? expected : expected_other);
  });
  EXPECT_EQ(calls.wrong, 0);
  EXPECT_EQ(calls.errors, 0);
}

// A shared KV cache read by several threads at once (attend is const), float32 and float16, a
// ring (with sink tokens), a paged cache whose second sequence is a fork of the first, with 1 to 4
// library threads each: every answer is bitwise the single-threaded one.
TEST(Threads, SharedCacheAttendedConcurrently) {
  struct Layout {
    maskattn::KVType dtype;
    int64_t window, sink_tokens, page_size;
  };
  using maskattn::KVType;
  for (const Layout& layout : {Layout{KVType::float32, 0, 0, 0}, Layout{KVType::float32, 900, 0, 0}, Layout{KVType::float16, 0, 0, 0},
                               Layout{KVType::float16, 900, 0, 0}, Layout{KVType::float32, 900, 4, 64}, Layout{KVType::q8, 0, 0, 64}}) {
    const auto dtype = layout.dtype;
    const int64_t window = layout.window;
    maskattn::KVCacheConfig c;
    c.batch = 2;
    c.kv_heads = 2;
    c.capacity = 2048;
    c.head_dim = 32;
    c.dtype = dtype;
    c.window = window;
    c.sink_tokens = layout.sink_tokens;
    c.page_size = layout.page_size;
    KVCache cache(c);
    const int64_t T = 1500;
    const std::vector<float> k = lcg_values(size_t(2 * 2 * T * 32), 7), v = lcg_values(size_t(2 * 2 * T * 32), 8);
    const bool fork = layout.page_size > 0 && window == 0;
    const std::vector<int32_t> counts = {int32_t(T), int32_t(fork ? 0 : T - 300)};
    cache.append(maskattn::bhld<const float>(k.data(), 2, 2, T, 32), maskattn::bhld<const float>(v.data(), 2, 2, T, 32), counts);
    if (fork) {  // sequence 1 shares sequence 0's pages, then goes its own way
      cache.fork(0, 1);
      cache.append(maskattn::bhld<const float>(k.data(), 2, 2, 7, 32), maskattn::bhld<const float>(v.data(), 2, 2, 7, 32),
                   std::vector<int32_t>{0, 7});
    }
    const int64_t Hq = 8, Lq = 2;
    const std::vector<float> q = lcg_values(size_t(2 * Hq * Lq * 32), 9);
    auto attend = [&](int threads) {
      std::vector<float> out(size_t(2 * Hq * Lq * 32)), lse(size_t(2 * Hq * Lq));
      Options o = KVCache::default_options();
      o.threads = threads;
      maskattn::ExtraOutputs extra;
      extra.lse = lse.data();
      cache.attend(maskattn::bhld<const float>(q.data(), 2, Hq, Lq, 32), maskattn::bhld(out.data(), 2, Hq, Lq, 32), o, extra);
      out.insert(out.end(), lse.begin(), lse.end());
      return out;
    };
    const std::vector<float> expected = attend(1);
    for (int threads : {2, 3, 8}) EXPECT_TRUE(bitwise_equal(attend(threads), expected)) << threads << " threads";
    const maskattn_test::ConcurrentCalls readers =
        maskattn_test::run_concurrently(4, 5, [&](int r, int n) { return bitwise_equal(attend(1 + (r + n) % 4), expected); });
    EXPECT_EQ(readers.wrong, 0) << "dtype " << int(dtype) << " window " << window << " pages " << layout.page_size;
    EXPECT_EQ(readers.errors, 0);
  }
}

// Errors from several threads at once: each caller gets its own ArgumentError, the library state
// (the pool) is unharmed, and valid calls running alongside are right.
TEST(Threads, ErrorsOnSomeThreadsDoNotDisturbOthers) {
  const Inputs in(kShapes[1]);
  const auto t = maskattn::best_target();
  const std::vector<float> expected = in.run(t, maskattn::Kernel::automatic, 1);
  std::atomic<int> wrong{0}, argument_errors{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int n = 0; n < 4; ++n) {
        if (c % 2 == 0) {
          if (!bitwise_equal(in.run(t, maskattn::Kernel::automatic, 3), expected)) ++wrong;
        } else {
          try {
            Options o = in.options(t, maskattn::Kernel::automatic, 4);
            o.softcap = -1.0f;
            (void)in.c.run_kernel(in.inputs, o);
          } catch (const maskattn::ArgumentError& e) {
            if (e.argument() == "softcap") ++argument_errors;
          }
        }
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(argument_errors.load(), 8);
}

}  // namespace

#endif
