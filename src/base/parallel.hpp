// A minimal worker pool call: f(worker, unit) for every unit in [0, units), units handed out one by
// one so uneven work balances, worker in [0, threads). threads == 1 runs inline (and is all that
// WebAssembly builds without pthreads do). The work runs on `executor` (null = the process default:
// set_default_executor, else maskattn's own pool).
#pragma once

#include <cstdint>
#include <functional>

#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

void parallel_for(const Executor* executor, int threads, int64_t units, const std::function<void(int, int64_t)>& f);

}  // namespace maskattn::detail
