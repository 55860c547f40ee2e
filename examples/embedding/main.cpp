// Embedding maskattn in a C++ program that owns its threads: the program's own (minimal) thread
// pool is handed to maskattn as its Executor, so maskattn starts no thread of its own. The same
// source builds natively and with emcmake against the installed package (examples/embedding/
// CMakeLists.txt); the printed numbers are compared between the two by the tests
// (tests/docs/commands.test.mjs, after running docs/embedding.md's commands).
//
//   embedding_app [--builtin]   (--builtin: maskattn's own pool instead of the host's)
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <maskattn/maskattn.hpp>

// The host's pool: a queue of (job, index) items; parallel_for queues one per index and the
// calling thread works through the queue until its own job is done. Zero workers is valid (the
// caller runs everything): what a WebAssembly build without pthreads gets.
class HostPool {
 public:
  explicit HostPool(int workers) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { loop(); });
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
    for (int64_t i = 0; i < count; ++i) queue_.push_back({&job, i});
    work_.notify_all();
    while (job.remaining > 0) {
      if (!queue_.empty()) run_one(lock);
      else done_.wait(lock);
    }
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
  void run_one(std::unique_lock<std::mutex>& lock) {
    const Item item = queue_.front();
    queue_.pop_front();
    lock.unlock();
    (*item.job->task)(item.index);
    lock.lock();
    if (--item.job->remaining == 0) done_.notify_all();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      run_one(lock);
    }
  }
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Item> queue_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

std::vector<float> inputs(size_t n, float a, float b) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(a * float(i) + b);
  return v;
}

// Prints a result as a few sums and rows, the same format natively and in WebAssembly.
void print(const char* name, const std::vector<float>& out, size_t row) {
  double sum = 0, abs_sum = 0;
  for (float x : out) {
    sum += x;
    abs_sum += std::fabs(x);
  }
  std::printf("%s sum %.7e abs %.7e\n", name, sum, abs_sum);
  for (size_t r = 0; r < 3; ++r) {
    std::printf("%s row %zu", name, r);
    for (size_t d = 0; d < 6; ++d) std::printf(" %.7e", out[r * row + d]);
    std::printf("\n");
  }
}

int main(int argc, char** argv) {
  const bool builtin = argc > 1 && !std::strcmp(argv[1], "--builtin");
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  HostPool pool(0);  // no threads in this build: the caller runs every task
#else
  HostPool pool(3);
#endif
  const maskattn::Executor host{[&](int64_t count, const std::function<void(int64_t)>& task) { pool.parallel_for(count, task); }};
  if (!builtin) maskattn::set_default_executor(host);  // once per process; Options::executor per call

  // Prefill: causal GQA, two sequences with key padding, 4 threads' worth of work.
  const int64_t B = 2, Hq = 8, Hkv = 2, L = 160, D = 64;
  const std::vector<float> q = inputs(size_t(B * Hq * L * D), 0.37f, 0.f), k = inputs(size_t(B * Hkv * L * D), 0.21f, 1.f),
                           v = inputs(size_t(B * Hkv * L * D), 0.11f, 2.f);
  std::vector<float> out(size_t(B * Hq * L * D));
  const std::vector<int32_t> key_lengths = {160, 97};
  maskattn::Options opt;
  opt.causal = true;
  opt.key_lengths = key_lengths;
  opt.threads = 4;
  maskattn::Stats stats;
  opt.stats = &stats;
  maskattn::attention(maskattn::bhld(q.data(), B, Hq, L, D), maskattn::bhld(k.data(), B, Hkv, L, D),
                      maskattn::bhld(v.data(), B, Hkv, L, D), maskattn::bhld(out.data(), B, Hq, L, D), opt);
  print("prefill", out, size_t(D));

  // Decode: one new token per sequence over a long KV cache, keys split across threads.
  maskattn::KVCacheConfig c;
  c.batch = 2;
  c.kv_heads = Hkv;
  c.capacity = 3000;
  c.head_dim = D;
  maskattn::KVCache cache(c);
  const int64_t T = 2500;
  const std::vector<float> ck = inputs(size_t(2 * Hkv * T * D), 0.013f, 0.5f), cv = inputs(size_t(2 * Hkv * T * D), 0.029f, 1.5f);
  cache.append(maskattn::bhld(ck.data(), 2, Hkv, T, D), maskattn::bhld(cv.data(), 2, Hkv, T, D));
  const std::vector<float> dq = inputs(size_t(2 * Hq * D), 0.5f, 0.25f);
  std::vector<float> dout(size_t(2 * Hq * D));
  maskattn::Options dopt = maskattn::KVCache::default_options();
  dopt.threads = 4;
  dopt.stats = &stats;
  cache.attend(maskattn::bhld(dq.data(), 2, Hq, 1, D), maskattn::bhld(dout.data(), 2, Hq, 1, D), dopt);
  print("decode", dout, size_t(D));

  // A bad argument is an ArgumentError naming it, in WebAssembly as natively.
  try {
    maskattn::set_thread_pool_config({-1.0});
  } catch (const maskattn::ArgumentError& e) {
    std::printf("error argument %s\n", e.argument().c_str());
  }

  const maskattn::ThreadPoolInfo info = maskattn::thread_pool_info();
  std::fprintf(stderr, "maskattn %s, target %s, %s executor, up to %d threads used; maskattn's own pool started %d threads\n",
               maskattn::version(), maskattn::target_name(maskattn::best_target()), builtin ? "built-in" : "host",
               stats.threads_used, info.threads_started);
  maskattn::reset_default_executor();
  return !builtin && info.threads_started != 0;  // with the host's pool maskattn must start none
}
