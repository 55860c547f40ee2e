// Bring your own threads: maskattn's parallel work on a host's executor (Options::executor,
// set_default_executor) gives bitwise the results of maskattn's own pool at 1, 2, 3 and 8 threads,
// every kernel and target, and starts no thread of maskattn's. Hosts that break the contract
// (skip a task, call one twice or outside the range, return early, call a kept copy later, throw)
// get ArgumentError("executor") or their own exception, never an answer, and no work outlives the
// call.
//
// With MASKATTN_TEST_EXECUTOR=1 in the environment, the whole binary runs with a pool this file
// owns as the process default (set before the first test), and when the run ends it checks that
// maskattn's own pool never started a thread nor ran a job. scripts/test.sh runs every threaded
// suite that way (natively and under ThreadSanitizer): --gtest_filter='Threads.*:*ThreadCount*:Executor.*'.
#include <gtest/gtest.h>

#if !defined(__EMSCRIPTEN__)  // the host pool below starts std::threads

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/parallel.hpp"
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
    EXPECT_NE(std::string(e.what()).find("parallel_for(3, task): returned before calling task(2)"), std::string::npos) << e.what();
  }
  // The library is unharmed.
  EXPECT_TRUE(bitwise_equal(p.run(t, maskattn::Kernel::automatic, 1, nullptr), p.run(t, maskattn::Kernel::automatic, 2, nullptr)));
}

// ---------------------------------------------------------------------------------------------
// Hosts that break the contract. maskattn trusts nothing a host does: every task index must run
// exactly once, within parallel_for, or the call fails with ArgumentError("executor") (the
// host's own exception, when it throws one); no task does any work after the call has ended,
// and a task's duplicate never runs beside the original (it would share its scratch).
// ---------------------------------------------------------------------------------------------

// Threads a host leaves running after its parallel_for returned, with copies of the task; they
// call it once release() says so (after the maskattn call has returned to the test).
class Leftovers {
 public:
  ~Leftovers() { settle(); }
  void add(std::function<void()> late) {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.emplace_back([this, late = std::move(late)] {
      while (!released_.load()) std::this_thread::yield();
      late();
    });
  }
  // Lets the left-behind threads run their late calls and waits for them.
  void settle() {
    released_.store(true);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    released_.store(false);
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> threads_;
  std::atomic<bool> released_{false};
};

// task(i) for the given indices, each on a thread of its own, all starting together; joined before
// it returns.
void on_threads(const std::vector<int64_t>& indices, const std::function<void(int64_t)>& task) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int64_t i : indices)
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < int(indices.size())) std::this_thread::yield();
      task(i);
    });
  for (auto& t : threads) t.join();
}
// Every task on a thread of its own that runs it only once `go` is set (by the host, just before it
// returns or throws): the tasks run while or after maskattn's call ends.
void run_after(int64_t count, const std::function<void(int64_t)>& task, Leftovers& left,
               const std::shared_ptr<std::atomic<bool>>& go) {
  for (int64_t i = 0; i < count; ++i)
    left.add([task, go, i] {  // a copy of the task, as a host's queue would keep one
      while (!go->load()) std::this_thread::yield();
      task(i);
    });
}

enum class Expect { bitwise, executor_error, host_error };
struct HostCase {
  const char* name;
  Expect expect;
  const char* says;  // what an executor error must say
  std::function<void(int64_t, const std::function<void(int64_t)>&, Leftovers&)> parallel_for;
  bool threads = false;  // runs tasks on threads of its own
};

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

const std::vector<HostCase>& host_cases() {
  using Task = const std::function<void(int64_t)>&;
  static const std::vector<HostCase> cases = {
      // Within the contract: any order, any threads.
      {"backwards", Expect::bitwise, "", [](int64_t n, Task task, Leftovers&) { for (int64_t i = n - 1; i >= 0; --i) task(i); }},
      {"evens_then_odds", Expect::bitwise, "", [](int64_t n, Task task, Leftovers&) {
         for (int64_t i = 0; i < n; i += 2) task(i);
         for (int64_t i = 1; i < n; i += 2) task(i);
       }},
      {"a_thread_each_started_shuffled", Expect::bitwise, "", [](int64_t n, Task task, Leftovers&) {
         std::vector<int64_t> order = iota(0, n);
         std::reverse(order.begin() + n / 2, order.end());
         std::rotate(order.begin(), order.begin() + n / 2, order.end());
         on_threads(order, task);
       }, true},
      {"a_copy_of_the_builtin_executor", Expect::bitwise, "",
       [](int64_t n, Task task, Leftovers&) { maskattn::Executor(maskattn::builtin_executor()).parallel_for(n, task); }, true},
      // Correct, then keeps a copy of the task and calls every index again after the call ended:
      // nothing of the call can tell, so those calls must do nothing (the test compares the output
      // again once they ran).
      {"correct_then_calls_a_kept_copy_later", Expect::bitwise, "", [](int64_t n, Task task, Leftovers& left) {
         for (int64_t i = 0; i < n; ++i) task(i);
         left.add([task, n] { for (int64_t i = 0; i < n; ++i) task(i); });
       }, true},
      // Skips.
      {"skips_the_last_task", Expect::executor_error, "returned before calling task(",
       [](int64_t n, Task task, Leftovers&) { for (int64_t i = 0; i + 1 < n; ++i) task(i); }},
      {"skips_the_first_task", Expect::executor_error, "returned before calling task(0)",
       [](int64_t n, Task task, Leftovers&) { for (int64_t i = 1; i < n; ++i) task(i); }},
      {"runs_nothing", Expect::executor_error, "returned before calling task(0)", [](int64_t, Task, Leftovers&) {}},
      // Duplicates: as many calls as tasks, one index twice and one never (a count of calls passes).
      {"task_0_twice_and_no_last_serially", Expect::executor_error, "called task(0) twice", [](int64_t n, Task task, Leftovers&) {
         task(0);
         for (int64_t i = 0; i + 1 < n; ++i) task(i);
       }},
      {"every_task_then_task_0_again", Expect::executor_error, "called task(0) twice", [](int64_t n, Task task, Leftovers&) {
         for (int64_t i = 0; i < n; ++i) task(i);
         task(0);
       }},
      {"task_0_twice_at_once_and_no_last", Expect::executor_error, "called task(0) twice", [](int64_t n, Task task, Leftovers&) {
         on_threads({0, 0}, task);
         for (int64_t i = 1; i + 1 < n; ++i) task(i);
       }, true},
      {"every_task_at_once_and_task_0_again", Expect::executor_error, "called task(0) twice", [](int64_t n, Task task, Leftovers&) {
         std::vector<int64_t> all = iota(0, n);
         all.push_back(0);
         on_threads(all, task);
       }, true},
      // Indices outside [0, count).
      {"task_count_after_every_task", Expect::executor_error, "outside [0, ", [](int64_t n, Task task, Leftovers&) {
         for (int64_t i = 0; i <= n; ++i) task(i);
       }},
      {"task_minus_1_first", Expect::executor_error, "called task(-1), outside [0, ", [](int64_t n, Task task, Leftovers&) {
         for (int64_t i = -1; i < n; ++i) task(i);
       }},
      // Returns early: the last task runs (from a kept copy) after the call ended, or every task
      // runs on the host's threads while parallel_for returns.
      {"last_task_after_the_call", Expect::executor_error, "returned before calling task(", [](int64_t n, Task task, Leftovers& left) {
         for (int64_t i = 0; i + 1 < n; ++i) task(i);
         left.add([task, n] { task(n - 1); });
       }, true},
      {"runs_every_task_after_the_call", Expect::executor_error, "returned before calling task(0)", [](int64_t n, Task task, Leftovers& left) {
         left.add([task, n] { for (int64_t i = 0; i < n; ++i) task(i); });
       }, true},
      {"returns_while_its_threads_run_the_tasks", Expect::executor_error, "returned", [](int64_t n, Task task, Leftovers& left) {
         const auto go = std::make_shared<std::atomic<bool>>(false);
         run_after(n, task, left, go);
         go->store(true);
       }, true},
      // Throws: its own exception reaches the caller, once no task is running.
      {"throws_before_any_task", Expect::host_error, "", [](int64_t, Task, Leftovers&) { throw std::runtime_error("host pool stopped"); }},
      {"throws_after_task_0", Expect::host_error, "", [](int64_t, Task task, Leftovers&) {
         task(0);
         throw std::runtime_error("host pool stopped");
       }},
      {"throws_and_runs_every_task_after_the_call", Expect::host_error, "", [](int64_t n, Task task, Leftovers& left) {
         left.add([task, n] { for (int64_t i = 0; i < n; ++i) task(i); });
         throw std::runtime_error("host pool stopped");
       }, true},
      {"throws_while_its_threads_run_the_tasks", Expect::host_error, "", [](int64_t n, Task task, Leftovers& left) {
         const auto go = std::make_shared<std::atomic<bool>>(false);
         run_after(n, task, left, go);
         go->store(true);
         throw std::runtime_error("host pool stopped");
       }, true},
  };
  return cases;
}

// MASKATTN_TEST_EXECUTOR=1 forbids maskattn's own pool, which one host wraps.
bool runs_in_this_run(const HostCase& host) {
  return !whole_run_on_host_pool() || std::strcmp(host.name, "a_copy_of_the_builtin_executor") != 0;
}

// What a host's parallel_for is called with: its largest count.
struct RecordingHost {
  const HostCase& host;
  Leftovers& left;
  std::atomic<int64_t> max_count{0};
  maskattn::Executor executor() {
    return {[this](int64_t count, const std::function<void(int64_t)>& task) {
      if (count > max_count.load()) max_count.store(count);
      host.parallel_for(count, task, left);
    }};
  }
};

// The sources of work: plain attention (decode and prefill shapes), and a KV cache of every dtype.
struct Source {
  std::string name;
  std::function<void(const maskattn::Executor*, maskattn::Kernel, int, std::vector<float>&)> run;
};

std::vector<Source> sources() {
  std::vector<Source> v;
  struct Plain {
    int64_t B, Hq, Hkv, Lq, Lk, D;
  };
  for (const Plain s : {Plain{1, 8, 2, 2, 3000, 32}, Plain{1, 4, 4, 200, 200, 32}}) {
    const auto q = std::make_shared<std::vector<float>>(lcg_values(size_t(s.B * s.Hq * s.Lq * s.D), 11));
    const auto k = std::make_shared<std::vector<float>>(lcg_values(size_t(s.B * s.Hkv * s.Lk * s.D), 12));
    const auto val = std::make_shared<std::vector<float>>(lcg_values(size_t(s.B * s.Hkv * s.Lk * s.D), 13));
    v.push_back({s.Lq == 2 ? "plain_decode_shape" : "plain_prefill_shape",
                 [=](const maskattn::Executor* e, maskattn::Kernel kernel, int threads, std::vector<float>& out) {
                   out.assign(size_t(s.B * s.Hq * s.Lq * s.D), 0.0f);
                   maskattn::Options o;
                   o.causal = true;
                   o.kernel = kernel;
                   o.threads = threads;
                   o.executor = e;
                   maskattn::attention(maskattn::bhld<const float>(q->data(), s.B, s.Hq, s.Lq, s.D),
                                       maskattn::bhld<const float>(k->data(), s.B, s.Hkv, s.Lk, s.D),
                                       maskattn::bhld<const float>(val->data(), s.B, s.Hkv, s.Lk, s.D),
                                       maskattn::bhld(out.data(), s.B, s.Hq, s.Lq, s.D), o);
                 }});
  }
  // Every dtype of maskattn/kv_types.inc.
  const maskattn::KVType dtypes[] = {
#define MASKATTN_KV_TYPE(name, bits) maskattn::KVType::name,
#include "maskattn/kv_types.inc"
#undef MASKATTN_KV_TYPE
  };
  for (maskattn::KVType dtype : dtypes) {
    maskattn::KVCacheConfig c;
    c.batch = 2;
    c.kv_heads = 2;
    c.capacity = 3000;
    c.head_dim = 32;
    c.dtype = dtype;
    const auto cache = std::make_shared<maskattn::KVCache>(c);
    const std::vector<float> k = lcg_values(size_t(2 * 2 * 3000 * 32), 7), val = lcg_values(size_t(2 * 2 * 3000 * 32), 8);
    cache->append(maskattn::bhld<const float>(k.data(), 2, 2, 3000, 32), maskattn::bhld<const float>(val.data(), 2, 2, 3000, 32));
    const auto q = std::make_shared<std::vector<float>>(lcg_values(size_t(2 * 8 * 2 * 32), 9));
    v.push_back({std::string("cache_") + maskattn::kv_type_name(dtype),
                 [=](const maskattn::Executor* e, maskattn::Kernel kernel, int threads, std::vector<float>& out) {
                   out.assign(size_t(2 * 8 * 2 * 32), 0.0f);
                   maskattn::Options o = maskattn::KVCache::default_options();
                   o.kernel = kernel;
                   o.threads = threads;
                   o.executor = e;
                   cache->attend(maskattn::bhld<const float>(q->data(), 2, 8, 2, 32), maskattn::bhld(out.data(), 2, 8, 2, 32), o);
                 }});
  }
  return v;
}

// Every host above, on every kernel, for plain attention and a KV cache of every dtype: hosts within
// the contract give bitwise the one-thread answer (and the built-in pool's); the others fail with
// ArgumentError("executor") saying what the host did, or with the host's own exception.
//
// Under ThreadSanitizer only the hosts with threads of their own run here (the serial ones race
// with nothing; they run natively, under AddressSanitizer, and in test_hostile.cpp). With
// MASKATTN_TEST_EXECUTOR=1 it is skipped: it names its executors, so that run would repeat it.
TEST(Executor, HostsThatBreakTheContractFailOnEveryKernelAndCacheDtype) {
  if (whole_run_on_host_pool()) GTEST_SKIP() << "every call here names its executor";
  const int threads = 4;
  for (const Source& source : sources())
    for (const maskattn::Kernel kernel : maskattn::kKernels) {
      const std::string where = source.name + " " + maskattn::kernel_name(kernel);
      std::vector<float> expected, out;
      source.run(nullptr, kernel, 1, expected);
      if (!whole_run_on_host_pool()) {  // (that run's environment forbids maskattn's own pool)
        source.run(&maskattn::builtin_executor(), kernel, threads, out);
        EXPECT_TRUE(bitwise_equal(out, expected)) << where << ": the built-in pool";
      }
      for (const HostCase& host : host_cases()) {
        if (kUnderTsan && !host.threads) continue;
        Leftovers left;
        RecordingHost recording{host, left};
        const maskattn::Executor e = recording.executor();
        const std::string what = where + " host " + host.name;
        try {
          source.run(&e, kernel, threads, out);
          EXPECT_EQ(host.expect, Expect::bitwise) << what << ": no error";
          EXPECT_TRUE(bitwise_equal(out, expected)) << what << ": wrong answer";
        } catch (const maskattn::ArgumentError& err) {
          EXPECT_EQ(host.expect, Expect::executor_error) << what << ": " << err.what();
          EXPECT_EQ(err.argument(), "executor") << what;
          EXPECT_NE(std::string(err.what()).find(host.says), std::string::npos) << what << ": " << err.what();
        } catch (const std::runtime_error& err) {
          EXPECT_EQ(host.expect, Expect::host_error) << what << ": " << err.what();
          EXPECT_STREQ(err.what(), "host pool stopped") << what;
        }
        const std::vector<float> returned = out;
        left.settle();  // the calls a host made after maskattn returned change nothing
        EXPECT_TRUE(bitwise_equal(out, returned)) << what << ": written after the call returned";
        EXPECT_GE(recording.max_count.load(), 2) << what << ": the call must split into tasks";
      }
    }
}

// The same hosts seen from the work (maskattn's internal parallel_for, f(worker, unit)): a host
// within the contract gets every unit run exactly once; with any host, no two calls of f share a
// worker index at once (a worker's scratch is its own), and f never runs after parallel_for has
// returned or thrown.
TEST(Executor, NoWorkerRunsTwiceAtOnceAndNoWorkOutlivesTheCall) {
  constexpr int kThreads = 4;
  for (const HostCase& host : host_cases())
    for (const int64_t units : {2, 7, 40}) {
      if (!runs_in_this_run(host)) continue;
      const std::string what = std::string(host.name) + ", " + std::to_string(units) + " units";
      Leftovers left;
      RecordingHost recording{host, left};
      const maskattn::Executor e = recording.executor();
      std::vector<std::atomic<int>> runs(static_cast<size_t>(units)), busy(kThreads);
      std::atomic<bool> returned{false};
      std::atomic<int> shared_worker{0}, after_return{0}, bad_worker{0};
      const std::function<void(int, int64_t)> f = [&](int worker, int64_t unit) {
        if (returned.load()) ++after_return;
        if (worker < 0 || worker >= kThreads) {
          ++bad_worker;
          return;
        }
        if (busy[size_t(worker)].exchange(1)) ++shared_worker;
        ++runs[size_t(unit)];
        std::this_thread::sleep_for(std::chrono::microseconds(100));  // duplicates overlap
        busy[size_t(worker)].store(0);
      };
      Expect got = Expect::bitwise;
      try {
        maskattn::detail::parallel_for(&e, kThreads, units, f);
      } catch (const maskattn::ArgumentError& err) {
        got = Expect::executor_error;
        EXPECT_EQ(err.argument(), "executor") << what;
      } catch (const std::runtime_error&) {
        got = Expect::host_error;
      }
      returned.store(true);
      left.settle();
      EXPECT_EQ(got, host.expect) << what;
      EXPECT_EQ(after_return.load(), 0) << what << ": work ran after parallel_for returned";
      EXPECT_EQ(shared_worker.load(), 0) << what << ": two calls shared a worker index at once";
      EXPECT_EQ(bad_worker.load(), 0) << what;
      for (int64_t u = 0; u < units; ++u) {
        EXPECT_LE(runs[size_t(u)].load(), 1) << what << ": unit " << u << " ran twice";
        if (host.expect == Expect::bitwise) EXPECT_EQ(runs[size_t(u)].load(), 1) << what << ": unit " << u;
      }
    }
}

// A host that returns while its threads are inside tasks (each blocked in the work until the caller
// goes on, or 50 ms): parallel_for returns only once they have left, and reports the host.
TEST(Executor, ParallelForOutlastsTasksItsHostLeftRunning) {
  std::atomic<bool> returned{false};
  std::atomic<int> started{0}, after_return{0};
  std::vector<std::thread> threads;
  const maskattn::Executor early{[&](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < n; ++i)
      threads.emplace_back([&started, task, i] {  // a copy of the task: the reference dies with the call
        ++started;
        task(i);
      });
    while (started.load() < n) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the tasks are inside the work now
  }};
  const std::function<void(int, int64_t)> f = [&](int, int64_t) {
    const auto start = std::chrono::steady_clock::now();
    while (!returned.load() && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (returned.load()) ++after_return;
  };
  try {
    maskattn::detail::parallel_for(&early, 4, 4, f);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const maskattn::ArgumentError& err) {
    EXPECT_EQ(err.argument(), "executor");
    EXPECT_NE(std::string(err.what()).find("returned while a task was still running"), std::string::npos) << err.what();
  }
  returned.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(after_return.load(), 0) << "work ran after parallel_for returned";
}

// An error inside a task (maskattn's own, thrown by its work) reaches the caller as it was thrown
// whatever runs the tasks; when the host then misbehaves as well, the first of the two is reported.
TEST(Executor, AnErrorInsideATaskReachesTheCaller) {
  const std::function<void(int, int64_t)> f = [](int, int64_t unit) {
    if (unit == 3) throw std::domain_error("unit 3 failed");
  };
  for (const HostCase& host : host_cases()) {
    if (host.expect != Expect::bitwise || !runs_in_this_run(host)) continue;
    Leftovers left;
    RecordingHost recording{host, left};
    const maskattn::Executor e = recording.executor();
    EXPECT_THROW(maskattn::detail::parallel_for(&e, 4, 20, f), std::domain_error) << host.name;
  }
  // The task's error first, then a second call of task 0: the task's error.
  const maskattn::Executor twice{[](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < n; ++i) task(i);
    task(0);
  }};
  EXPECT_THROW(maskattn::detail::parallel_for(&twice, 4, 20, f), std::domain_error);
  // The host's misuse first (task(-1) before any work): ArgumentError, though a task would throw.
  const maskattn::Executor outside{[](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = -1; i < n; ++i) task(i);
  }};
  try {
    maskattn::detail::parallel_for(&outside, 4, 20, f);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const maskattn::ArgumentError& err) {
    EXPECT_EQ(err.argument(), "executor");
    EXPECT_NE(std::string(err.what()).find("called task(-1), outside [0, 4)"), std::string::npos) << err.what();
  }
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
