// A minimal worker pool call: f(worker, unit) for every unit in [0, units), units handed out one by
// one so uneven work balances. threads == 1 runs inline (and is all that WebAssembly builds do).
#pragma once

#include <cstdint>
#include <functional>

namespace maskattn::detail {

void parallel_for(int threads, int64_t units, const std::function<void(int, int64_t)>& f);

}  // namespace maskattn::detail
