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

// The work on a host's executor: `tasks` tasks, each taking units from a shared counter; errors
// caught inside a task (a host's pool may not carry exceptions) and rethrown here.
void host_parallel_for(const Executor& e, int tasks, int64_t units, const std::function<void(int, int64_t)>& f) {
  std::atomic<int64_t> next{0};
  std::atomic<int> finished{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  const std::function<void(int64_t)> task = [&](int64_t index) {
    if (index >= 0 && index < tasks) {
      try {
        for (int64_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) f(int(index), u);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(units);  // the other tasks stop taking units
        failed.store(true);
      }
    }
    finished.fetch_add(1, std::memory_order_acq_rel);
  };
  e.parallel_for(tasks, task);
  if (failed.load()) std::rethrow_exception(error);
  const int done = finished.load(std::memory_order_acquire);
  if (done != tasks || next.load() < units)
    fail("executor", cat("parallel_for(", tasks, ", task) returned after ", done, " task call(s), expected ", tasks,
                         " (it must run task(i) once for every i in [0, count) and return when all have returned)"));
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
    detail::builtin_parallel_for(int(std::min<int64_t>(count, 1024)), count, [&](int, int64_t i) { task(i); });
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
