// A persistent worker pool: threads are started once and kept, so a multi-threaded call costs a
// wake-up (a few microseconds), not a thread spawn per call (tens of microseconds, more than a
// small attention call takes). Workers spin briefly (ThreadPoolConfig::spin_us) after a job before
// sleeping.
//
// A host's executor (Options::executor, set_default_executor) replaces the pool: the call's work
// is cut into `threads` tasks handed to the host's parallel_for, each taking units from a shared
// counter (so a task's worker index is its task index, and a host that runs the tasks serially
// still gets every unit). The pool is then never touched: no thread of maskattn's starts.
//
// One job runs at a time. A call that finds the pool busy (another thread of the application is
// inside attention) runs its units inline on its own thread instead of waiting: results are the
// same, as they never depend on the thread count.
//
// WebAssembly (Emscripten pthreads): the workers are the module's Web Workers, started with it
// (js/load.js sizes the pool; a call never asks for more threads than it has). A browser's main
// thread may not sleep (Atomics.wait throws there, and Emscripten's futex would spin and warn), so a
// caller on it spins instead of sleeping while the workers finish their last units.
#include "base/parallel.hpp"

#include "base/errors.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__EMSCRIPTEN_PTHREADS__)
#include <emscripten/threading.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MASKATTN_PAUSE() _mm_pause()
#else
#define MASKATTN_PAUSE() std::this_thread::yield()
#endif

namespace maskattn::detail {
namespace {

// How long a waiting thread spins before it sleeps (ThreadPoolConfig::spin_us, in nanoseconds):
// measured by the clock, not in pause instructions (one pause is 26 ns on Zen 5, 1 ns on older
// cores). The default, 200 us, catches the next call of a decode loop without a futex wake-up
// (tens of microseconds in a VM); the spin yields regularly, so a thread that needs this core (our
// own worker on a busy machine, or another library's) gets it.
std::atomic<int64_t> g_spin_ns{200000};
std::atomic<int> g_threads_started{0};
std::atomic<int64_t> g_jobs{0};

// Whether this thread may sleep (block on a futex): not a browser's main thread.
bool may_sleep() {
#if defined(__EMSCRIPTEN_PTHREADS__)
  return !emscripten_is_main_browser_thread();
#else
  return true;
#endif
}

// Spins until done() or the spin time has passed; returns done(). spin_us 0: no spin at all.
template <class Done>
bool spin_until(Done&& done) {
  const auto spin = std::chrono::nanoseconds(g_spin_ns.load(std::memory_order_relaxed));
  if (spin.count() == 0) return done();
  const auto start = std::chrono::steady_clock::now();
  for (int n = 1;; ++n) {
    if (done()) return true;
    MASKATTN_PAUSE();
    if (n % 32 == 0 && std::chrono::steady_clock::now() - start > spin) return done();
    if (n % 1024 == 0) std::this_thread::yield();  // rarely: a yield costs microseconds in a VM
  }
}

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Runs f(worker, unit) over all units on up to `threads` threads (this one included). Returns
  // false without running anything if another job holds the pool.
  //
  // The caller never waits for a worker that has not joined: when it runs out of units it closes
  // the job and waits only for the workers inside it. A worker that wakes late (a sleeping vCPU
  // can take 100 us and more to wake) finds the job closed and goes back to waiting, so a call
  // with more threads is never slower than the caller alone by more than a wake-up notice.
  bool run(int threads, int64_t units, const std::function<void(int, int64_t)>& f) {
    std::unique_lock<std::mutex> job_lock(job_mutex_, std::try_to_lock);
    if (!job_lock.owns_lock()) return false;
    while (int(workers_.size()) < threads - 1) {
      const int id = int(workers_.size()) + 1;
      // A new worker starts from the current generation: only the job announced next is new to it.
      workers_.emplace_back([this, id, gen = generation_.load()] { worker_loop(id, gen); });
      g_threads_started.fetch_add(1, std::memory_order_relaxed);
    }
    g_jobs.fetch_add(1, std::memory_order_relaxed);
    job_ = &f;
    units_ = units;
    next_.store(0);
    error_ = nullptr;
    job_threads_ = threads;
    closed_.store(false);  // after the fields above: a worker that sees it open sees them
    {
      std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
      if (may_sleep()) lock.lock();
      else while (!lock.try_lock()) MASKATTN_PAUSE();  // held only for moments by a worker
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    work(0);
    // Close, then wait for the workers inside. (seq_cst: a worker that entered before the close is
    // counted in inside_, and one that enters after it sees closed_ and leaves.)
    closed_.store(true);
    if (!spin_until([&] { return inside_.load() == 0; })) {
      if (may_sleep()) {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return inside_.load() == 0; });
      } else {
        while (inside_.load() != 0) MASKATTN_PAUSE();
      }
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work(int worker) {
    try {
      for (int64_t u = next_++; u < units_; u = next_++) (*job_)(worker, u);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(units_);  // the others stop taking units
    }
  }

  void worker_loop(int id, uint64_t seen) {
    for (;;) {
      // Wait for a new job: spin first (cheap wake-up for back-to-back calls), then sleep.
      if (!spin_until([&] { return generation_.load() != seen; })) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen || stop_; });
      }
      seen = generation_.load();
      if (stop_) return;
      inside_.fetch_add(1);
      if (!closed_.load() && id < job_threads_) work(id);
      if (inside_.fetch_sub(1) == 1 && closed_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  std::mutex job_mutex_;  // held by the caller whose job runs
  std::mutex mutex_;      // guards sleeping and waking
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int> inside_{0};      // workers inside the current job
  std::atomic<bool> closed_{true};  // the caller has finished its units: no one may join
  const std::function<void(int, int64_t)>* job_ = nullptr;
  int64_t units_ = 0;
  int job_threads_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

// maskattn's own pool: f(worker, unit) on up to `threads` threads.
void builtin_parallel_for(int threads, int64_t units, const std::function<void(int, int64_t)>& f) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  threads = 1;
#endif
  if (threads > 1 && units > 1) {
    static Pool pool;
    if (pool.run(int(std::min<int64_t>(threads, units)), units, f)) return;
  }
  for (int64_t u = 0; u < units; ++u) f(0, u);
}

// The default executor: null = the built-in pool. A shared_ptr so that a call keeps the executor it
// started with while another thread replaces the default.
std::mutex g_default_mutex;
std::shared_ptr<const Executor> g_default;

std::shared_ptr<const Executor> default_executor() {
  std::lock_guard<std::mutex> lock(g_default_mutex);
  return g_default;
}

// One call's work on a host's executor: `tasks` tasks, each taking units from a shared counter.
// The host is trusted with nothing: each task index is claimed once (a second call of an index, an
// index outside [0, tasks) or a call after parallel_for returned does no work and fails the call),
// and the caller returns only once no task is inside f, so a task run late (a host that returned
// early, or kept a copy of the task) never touches the caller's stack, scratch or output. The state
// lives on the heap, held by every copy of the task, so such a late call reads only live memory.
// Errors thrown inside a task are caught there (a host's pool may not carry exceptions) and rethrown
// by check(); whichever comes first, a task's error or the host's misuse, is the one reported.
class HostCall {
 public:
  HostCall(int tasks, int64_t units, const std::function<void(int, int64_t)>& f)
      : tasks_(tasks), units_(units), f_(&f), claimed_(new std::atomic<bool>[size_t(tasks)]) {
    for (int i = 0; i < tasks; ++i) claimed_[size_t(i)].store(false, std::memory_order_relaxed);
  }

  // task(index), as the host calls it.
  void run(int64_t index) noexcept {
    // Dekker with close(): (seq_cst) either close() sees this task inside and waits for it, or the
    // task sees the call closed and leaves without touching anything of the caller's.
    in_flight_.fetch_add(1);
    if (closed_.load()) {
      late_.store(true);
    } else if (index < 0 || index >= tasks_) {
      misuse(Misuse::outside, index);
    } else if (claimed_[size_t(index)].exchange(true)) {
      misuse(Misuse::twice, index);
    } else {
      work(int(index));
    }
    in_flight_.fetch_sub(1);
  }

  // After the host's parallel_for returned (or threw): no task starts any more, and the ones still
  // inside (a host that returned early) finish before the caller goes on.
  void close() noexcept {
    closed_.store(true);
    if (in_flight_.load() == 0) return;
    returned_early_ = true;
    while (in_flight_.load() != 0) std::this_thread::yield();
  }

  // After close(): the first error of a task, or ArgumentError("executor") saying what the host did.
  void check() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    std::string what;
    if (misuse_ == Misuse::outside) what = cat("called task(", bad_index_, "), outside [0, ", tasks_, ")");
    if (misuse_ == Misuse::twice) what = cat("called task(", bad_index_, ") twice");
    int missing = 0;
    for (int i = 0; i < tasks_; ++i)
      if (!claimed_[size_t(i)].load(std::memory_order_relaxed) && ++missing <= 3)
        what += cat(missing > 1 ? ", " : what.empty() ? "returned before calling " : "; returned before calling ", "task(", i, ")");
    if (missing > 3) what += cat(" and ", missing - 3, " more");
    if (returned_early_) what += cat(what.empty() ? "" : "; ", "returned while a task was still running");
    if (late_.load()) what += cat(what.empty() ? "" : "; ", "called a task after it had returned");
    // (A claimed task runs out the units, so this is only a backstop.)
    if (what.empty() && next_.load() < units_) what = "returned before every task had run";
    if (!what.empty())
      fail("executor", cat("parallel_for(", tasks_, ", task): ", what, " (it must call task(i) exactly once for every i in [0, ",
                           tasks_, ") and return when every task has returned)"));
  }

 private:
  void work(int worker) {
    try {
      for (int64_t u = next_.fetch_add(1); u < units_; u = next_.fetch_add(1)) (*f_)(worker, u);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_ && misuse_ == Misuse::none) error_ = std::current_exception();
      next_.store(units_);  // the other tasks stop taking units
    }
  }
  enum class Misuse { none, outside, twice };
  void misuse(Misuse kind, int64_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_ && misuse_ == Misuse::none) {
      misuse_ = kind;
      bad_index_ = index;
    }
    next_.store(units_);  // the call fails: the other tasks stop taking units
  }

  const int tasks_;
  const int64_t units_;
  const std::function<void(int, int64_t)>* const f_;  // the caller's: used only while the call is open
  const std::unique_ptr<std::atomic<bool>[]> claimed_;
  std::atomic<int64_t> next_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<bool> closed_{false}, late_{false};
  bool returned_early_ = false;  // close() found a task inside
  std::mutex mutex_;
  std::exception_ptr error_;       // a task's, when it came first
  Misuse misuse_ = Misuse::none;  // the host's first misuse, when it came first
  int64_t bad_index_ = 0;
};

void host_parallel_for(const Executor& e, int tasks, int64_t units, const std::function<void(int, int64_t)>& f) {
  const auto call = std::make_shared<HostCall>(tasks, units, f);
  const std::function<void(int64_t)> task = [call](int64_t index) { call->run(index); };
  try {
    e.parallel_for(tasks, task);
  } catch (...) {
    call->close();  // the host's own error, passed on once no task is inside
    throw;
  }
  call->close();
  call->check();
}

}  // namespace

void parallel_for(const Executor* executor, int threads, int64_t units, const std::function<void(int, int64_t)>& f) {
  if (threads > 1 && units > 1) {
    std::shared_ptr<const Executor> held;
    if (!executor) {
      held = default_executor();
      executor = held.get();
    }
    if (executor && executor != &builtin_executor()) {
      host_parallel_for(*executor, int(std::min<int64_t>(threads, units)), units, f);
      return;
    }
  }
  builtin_parallel_for(threads, units, f);
}

}  // namespace maskattn::detail

namespace maskattn {

const Executor& builtin_executor() noexcept {
  static const Executor e{[](int64_t count, const std::function<void(int64_t)>& task) {
    detail::builtin_parallel_for(int(std::min<int64_t>(count, kMaxThreads)), count, [&](int, int64_t i) { task(i); });
  }};
  return e;
}

void set_default_executor(const Executor& executor) {
  if (!executor.parallel_for)
    detail::fail_type("executor", "parallel_for is empty (a null function); use reset_default_executor() for maskattn's own pool");
  auto copy = std::make_shared<const Executor>(executor);
  std::lock_guard<std::mutex> lock(detail::g_default_mutex);
  detail::g_default = std::move(copy);
}

void reset_default_executor() noexcept {
  std::shared_ptr<const Executor> old;
  std::lock_guard<std::mutex> lock(detail::g_default_mutex);
  old.swap(detail::g_default);
}

void set_thread_pool_config(const ThreadPoolConfig& config) {
  if (!(config.spin_us >= 0 && config.spin_us <= 1e6))  // NaN fails both
    detail::fail("spin_us", detail::cat("must be in [0, 1e6] microseconds, given ", config.spin_us));
  detail::g_spin_ns.store(int64_t(config.spin_us * 1000.0 + 0.5));
}

ThreadPoolConfig thread_pool_config() noexcept {
  return ThreadPoolConfig{double(detail::g_spin_ns.load()) / 1000.0};
}

ThreadPoolInfo thread_pool_info() noexcept {
  return ThreadPoolInfo{detail::g_threads_started.load(), detail::g_jobs.load()};
}

}  // namespace maskattn
