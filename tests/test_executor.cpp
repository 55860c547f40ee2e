// Bring your own threads: maskattn's parallel work on a host's executor (Options::executor,
// set_default_executor) gives bitwise the results of maskattn's own pool at 1, 2, 3 and 8 threads,
// every kernel and target, and starts no thread of maskattn's.
//
// With MASKATTN_TEST_EXECUTOR=1 in the environment, the whole binary runs with a pool this file
// owns as the process default (set before the first test), and when the run ends it checks that
// maskattn's own pool never started a thread nor ran a job. scripts/test.sh runs every threaded
// suite that way (natively and under ThreadSanitizer): --gtest_filter='Threads.*:*ThreadCount*:Executor.*'.
#include <gtest/gtest.h>

#if !defined(__EMSCRIPTEN__)  // the host pool below starts std::threads

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "maskattn/maskattn.hpp"
#include "thread_cases.hpp"

namespace {

// A minimal host thread pool, as a host application would own one: a queue of (job, index) items;
// parallel_for queues one item per index and the calling thread helps until its job is done.
class HostPool {
 public:
  explicit HostPool(int workers) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { loop(); });
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& t : threads_) worker_ids_.insert(t.get_id());
  }
  ~HostPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void parallel_for(int64_t count, const std::function<void(int64_t)>& task) {
    Job job{&task, count};
    std::unique_lock<std::mutex> lock(mutex_);
    ++calls_;
    for (int64_t i = 0; i < count; ++i) queue_.push_back({&job, i});
    work_.notify_all();
    while (job.remaining > 0) {
      if (!queue_.empty()) {
        run(lock);
      } else {
        done_.wait(lock);
      }
    }
  }
  maskattn::Executor executor() {
    return {[this](int64_t count, const std::function<void(int64_t)>& task) { parallel_for(count, task); }};
  }
  // Threads that ran a task, other than the pool's own workers.
  std::set<std::thread::id> outsiders() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::set<std::thread::id> r;
    for (auto id : runners_)
      if (!worker_ids_.count(id)) r.insert(id);
    return r;
  }
  int64_t tasks_run() {
    std::lock_guard<std::mutex> lock(mutex_);
    return tasks_run_;
  }
  int64_t calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  struct Job {
    const std::function<void(int64_t)>* task;
    int64_t remaining;
  };
  struct Item {
    Job* job;
    int64_t index;
  };
  // Runs the queue's first item (the lock is held on entry and on return).
  void run(std::unique_lock<std::mutex>& lock) {
    const Item item = queue_.front();
    queue_.pop_front();
    runners_.insert(std::this_thread::get_id());
    lock.unlock();
    (*item.job->task)(item.index);
    lock.lock();
    ++tasks_run_;
    if (--item.job->remaining == 0) done_.notify_all();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_
      run(lock);
    }
  }
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Item> queue_;
  std::vector<std::thread> threads_;
  std::set<std::thread::id> worker_ids_, runners_;
  int64_t tasks_run_ = 0, calls_ = 0;
  bool stop_ = false;
};

bool whole_run_on_host_pool() {
  const char* e = std::getenv("MASKATTN_TEST_EXECUTOR");
  return e && *e && std::strcmp(e, "0") != 0;
}

// MASKATTN_TEST_EXECUTOR=1: every call of the run goes through a pool this file owns.
class HostPoolEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    before_ = maskattn::thread_pool_info();
    pool_ = std::make_unique<HostPool>(3);
    maskattn::set_default_executor(pool_->executor());
  }
  void TearDown() override {
    maskattn::reset_default_executor();
    const maskattn::ThreadPoolInfo after = maskattn::thread_pool_info();
    EXPECT_EQ(after.threads_started, before_.threads_started) << "maskattn started threads of its own";
    EXPECT_EQ(after.jobs, before_.jobs) << "maskattn's own pool ran jobs";
    EXPECT_GT(pool_->tasks_run(), 0) << "no work reached the host's pool";
    std::printf("[ executor ] host pool ran %lld tasks in %lld parallel_for calls; maskattn's pool: %d threads, %lld jobs\n",
                (long long)pool_->tasks_run(), (long long)pool_->calls(), after.threads_started, (long long)after.jobs);
    pool_.reset();
  }

 private:
  maskattn::ThreadPoolInfo before_;
  std::unique_ptr<HostPool> pool_;
};
const bool kEnvironmentRegistered =
    whole_run_on_host_pool() && ::testing::AddGlobalTestEnvironment(new HostPoolEnvironment) != nullptr;

using maskattn_test::bitwise_equal;
using maskattn_test::lcg_values;
using Problem = maskattn_test::ThreadInputs;
using Shape = maskattn_test::ThreadShape;

// Under ThreadSanitizer (scripts/test.sh) the bitwise sweep runs on the best target only: the races
// it looks for are in the thread hand-off, which every target shares (about 35 s otherwise).
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#else
constexpr bool kUnderTsan = false;
#endif

std::vector<maskattn::Target> targets() {
  if (kUnderTsan) return {maskattn::best_target()};
  return maskattn_test::available_targets();
}

// Decode with several key chunks, prefill with several query blocks, a windowed GQA problem, and
// the encoder shape (16 ragged sentences, few heads).
const Shape kShapes[] = {
    {"decode_long_keys", 1, 8, 2, 2, 2600, 32, 32, true, 0},
    {"prefill_blocks", 1, 4, 4, 200, 200, 32, 32, true, 0},
    {"gqa_window", 2, 4, 2, 40, 700, 16, 16, false, 7},
    {"encoder_ragged", 16, 4, 2, 40, 40, 16, 16, false, 7},
};

// The host pool against maskattn's own, at 1, 2, 3 and 8 threads, every kernel, every target; the
// host pool's size (0 workers: the caller runs every task; 2; 8) does not matter either.
TEST(Executor, BitwiseEqualToBuiltinPool) {
  if (whole_run_on_host_pool()) GTEST_SKIP() << "compares with maskattn's own pool, which this run must not start";
  HostPool serial(0), small(2), big(8);
  const maskattn::Executor hosts[] = {serial.executor(), small.executor(), big.executor()};
  for (const Shape& shape : kShapes) {
    const Problem p(shape);
    for (auto t : targets())
      for (auto kernel : {maskattn::Kernel::automatic, maskattn::Kernel::prefill, maskattn::Kernel::decode_split,
                          maskattn::Kernel::prefill_split})
        for (int threads : {1, 2, 3, 8}) {
          maskattn::Stats builtin_stats;
          const std::vector<float> expected = p.run(t, kernel, threads, &maskattn::builtin_executor(), &builtin_stats);
          for (const maskattn::Executor& host : hosts) {
            maskattn::Stats stats;
            EXPECT_TRUE(bitwise_equal(expected, p.run(t, kernel, threads, &host, &stats)))
                << shape.name << " " << maskattn::target_name(t) << " " << maskattn::kernel_name(kernel) << " "
                << threads << " threads";
            EXPECT_EQ(stats.threads_used, builtin_stats.threads_used) << shape.name;
            if (threads > 1) EXPECT_GE(stats.threads_used, 2) << shape.name << " must really split";
          }
        }
  }
  EXPECT_GT(small.tasks_run(), 0);
  EXPECT_GT(big.tasks_run(), 0);
  EXPECT_TRUE(small.outsiders().size() <= 1 && big.outsiders().size() <= 1)
      << "tasks ran only on the pool's workers and on the calling thread";
}

// A supplied executor keeps maskattn's pool untouched: no job, no thread (counted by the library
// and by the OS), and the work ran on the host's threads.
TEST(Executor, NoMaskattnThreadStartsWhenOneIsSupplied) {
  HostPool host(3);
  const maskattn::Executor e = host.executor();
  const Problem p(kShapes[0]), enc(kShapes[3]);
  const maskattn::ThreadPoolInfo before = maskattn::thread_pool_info();
  const auto os_threads = [] {
    int n = 0;
    if (FILE* f = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Threads: %d", &n) == 1) break;
      std::fclose(f);
    }
    return n;
  };
  const int threads_before = os_threads();
  for (int threads : {2, 3, 8}) {
    maskattn::Stats stats;
    p.run(maskattn::best_target(), maskattn::Kernel::automatic, threads, &e, &stats);
    EXPECT_GE(stats.threads_used, 2);
    enc.run(maskattn::best_target(), maskattn::Kernel::automatic, threads, &e);
  }
  const maskattn::ThreadPoolInfo after = maskattn::thread_pool_info();
  EXPECT_EQ(after.jobs, before.jobs);
  EXPECT_EQ(after.threads_started, before.threads_started);
  EXPECT_EQ(os_threads(), threads_before);
  EXPECT_GT(host.tasks_run(), 0);
}

// The process default: every call without Options::executor uses it (per-call builtin_executor()
// still picks maskattn's own pool); reset goes back.
TEST(Executor, DefaultExecutorIsUsedUntilReset) {
  if (whole_run_on_host_pool()) GTEST_SKIP() << "this run's default executor is the environment's";
  HostPool host(2);
  const Problem p(kShapes[1]);
  const auto t = maskattn::best_target();
  const std::vector<float> expected = p.run(t, maskattn::Kernel::automatic, 1, nullptr);
  maskattn::set_default_executor(host.executor());
  const maskattn::ThreadPoolInfo before = maskattn::thread_pool_info();
  EXPECT_TRUE(bitwise_equal(expected, p.run(t, maskattn::Kernel::automatic, 3, nullptr)));
  EXPECT_EQ(maskattn::thread_pool_info().jobs, before.jobs);
  const int64_t calls = host.calls();
  EXPECT_GT(calls, 0);
  EXPECT_TRUE(bitwise_equal(expected, p.run(t, maskattn::Kernel::automatic, 3, &maskattn::builtin_executor())));
  EXPECT_EQ(host.calls(), calls);
  EXPECT_GT(maskattn::thread_pool_info().jobs, before.jobs);
  maskattn::reset_default_executor();
  EXPECT_TRUE(bitwise_equal(expected, p.run(t, maskattn::Kernel::automatic, 3, nullptr)));
  EXPECT_EQ(host.calls(), calls);
  // One thread never reaches an executor.
  maskattn::set_default_executor(host.executor());
  p.run(t, maskattn::Kernel::automatic, 1, nullptr);
  EXPECT_EQ(host.calls(), calls);
  maskattn::reset_default_executor();
}

// Several application threads call maskattn at once through one host pool (parallel_for entered
// concurrently), plain attention and a shared KV cache: every answer is the one-thread one.
TEST(Executor, ConcurrentCallersShareTheHostPool) {
  HostPool host(3);
  const maskattn::Executor e = host.executor();
  const Problem a(kShapes[0]), b(kShapes[3]);
  const auto t = maskattn::best_target();
  const std::vector<float> ea = a.run(t, maskattn::Kernel::automatic, 1, &e), eb = b.run(t, maskattn::Kernel::automatic, 1, &e);

  maskattn::KVCacheConfig c;
  c.batch = 2;
  c.kv_heads = 2;
  c.capacity = 1600;
  c.head_dim = 32;
  maskattn::KVCache cache(c);
  const std::vector<float> k = lcg_values(size_t(2 * 2 * 1500 * 32), 7), v = lcg_values(size_t(2 * 2 * 1500 * 32), 8);
  cache.append(maskattn::bhld<const float>(k.data(), 2, 2, 1500, 32), maskattn::bhld<const float>(v.data(), 2, 2, 1500, 32));
  const std::vector<float> q = lcg_values(size_t(2 * 8 * 32), 9);
  auto attend = [&](int threads) {
    std::vector<float> out(size_t(2 * 8 * 32));
    maskattn::Options o = maskattn::KVCache::default_options();
    o.threads = threads;
    o.executor = &e;
    cache.attend(maskattn::bhld<const float>(q.data(), 2, 8, 1, 32), maskattn::bhld(out.data(), 2, 8, 1, 32), o);
    return out;
  };
  const std::vector<float> ec = attend(1);
  const maskattn_test::ConcurrentCalls calls = maskattn_test::run_concurrently(4, 5, [&](int caller, int n) {
    const int threads = 2 + (caller + n) % 7;
    switch ((caller + n) % 3) {
      case 0: return bitwise_equal(a.run(t, maskattn::Kernel::automatic, threads, &e), ea);
      case 1: return bitwise_equal(b.run(t, maskattn::Kernel::automatic, threads, &e), eb);
      default: return bitwise_equal(attend(threads), ec);
    }
  });
  EXPECT_EQ(calls.wrong, 0);
  EXPECT_EQ(calls.errors, 0);
}

// A host whose parallel_for runs the tasks backwards, one after another on the caller: any order
// gives the same bits.
TEST(Executor, AnyTaskOrderGivesTheSameBits) {
  int64_t tasks = 0;
  const maskattn::Executor reverse{[&](int64_t count, const std::function<void(int64_t)>& task) {
    for (int64_t i = count - 1; i >= 0; --i) task(i);
    tasks += count;
  }};
  for (const Shape& shape : kShapes) {
    const Problem p(shape);
    const auto t = maskattn::best_target();
    const std::vector<float> expected = p.run(t, maskattn::Kernel::automatic, 1, nullptr);
    for (int threads : {2, 3, 8}) EXPECT_TRUE(bitwise_equal(expected, p.run(t, maskattn::Kernel::automatic, threads, &reverse)));
  }
  EXPECT_GT(tasks, 0);
}

// A host's parallel_for that throws: the error reaches the caller. One that returns without running
// every task: ArgumentError naming the executor (never a silently partial result).
TEST(Executor, BrokenHostsAreReported) {
  const Problem p(kShapes[1]);
  const auto t = maskattn::best_target();
  const maskattn::Executor throwing{[](int64_t, const std::function<void(int64_t)>&) { throw std::runtime_error("host pool stopped"); }};
  EXPECT_THROW(p.run(t, maskattn::Kernel::automatic, 2, &throwing), std::runtime_error);
  const maskattn::Executor lazy{[](int64_t count, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i + 1 < count; ++i) task(i);  // forgets the last task
  }};
  try {
    p.run(t, maskattn::Kernel::automatic, 3, &lazy);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const maskattn::ArgumentError& e) {
    EXPECT_EQ(e.argument(), "executor");
    EXPECT_NE(std::string(e.what()).find("expected 3"), std::string::npos) << e.what();
  }
  // The library is unharmed.
  EXPECT_TRUE(bitwise_equal(p.run(t, maskattn::Kernel::automatic, 1, nullptr), p.run(t, maskattn::Kernel::automatic, 2, nullptr)));
}

// Bad input to the new entry points: errors name the argument.
TEST(Executor, BadArgumentsNameTheArgument) {
  const Problem p(kShapes[1]);
  const maskattn::Executor empty{};
  try {
    p.run(maskattn::best_target(), maskattn::Kernel::automatic, 2, &empty);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const maskattn::ArgumentError& e) {
    EXPECT_EQ(e.argument(), "executor");
    EXPECT_TRUE(e.is_type_error());
  }
  // Validated even when one thread would never reach it.
  EXPECT_THROW(p.run(maskattn::best_target(), maskattn::Kernel::automatic, 1, &empty), maskattn::ArgumentError);
  try {
    maskattn::set_default_executor(empty);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const maskattn::ArgumentError& e) {
    EXPECT_EQ(e.argument(), "executor");
  }
  const maskattn::ThreadPoolConfig saved = maskattn::thread_pool_config();
  for (double bad : {-1.0, -0.0001, 1e6 + 1, std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    try {
      maskattn::set_thread_pool_config({bad});
      ADD_FAILURE() << "expected ArgumentError for spin_us " << bad;
    } catch (const maskattn::ArgumentError& e) {
      EXPECT_EQ(e.argument(), "spin_us");
      EXPECT_NE(std::string(e.what()).find("microseconds"), std::string::npos) << e.what();
    }
    EXPECT_EQ(maskattn::thread_pool_config().spin_us, saved.spin_us) << "a rejected config changes nothing";
  }
}

// The spin time: read back as set; with 0 (sleep at once) and with a long spin, threaded results are
// unchanged.
TEST(Executor, SpinTimeIsAppliedAndKeepsResults) {
  const maskattn::ThreadPoolConfig saved = maskattn::thread_pool_config();
  EXPECT_EQ(saved.spin_us, 200.0) << "the default";
  const Problem p(kShapes[0]);
  const auto t = maskattn::best_target();
  const std::vector<float> expected = p.run(t, maskattn::Kernel::automatic, 1, nullptr);
  for (double spin : {0.0, 1.5, 3000.0}) {
    maskattn::set_thread_pool_config({spin});
    EXPECT_EQ(maskattn::thread_pool_config().spin_us, spin);
    for (int threads : {2, 3}) EXPECT_TRUE(bitwise_equal(expected, p.run(t, maskattn::Kernel::automatic, threads, nullptr)));
  }
  maskattn::set_thread_pool_config(saved);
}

}  // namespace

#endif
