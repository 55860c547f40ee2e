// Storage that starts on a cache line. operator new promises 16 bytes (glibc gives large blocks 16
// bytes past a page boundary), so rows of 64-byte multiple length there have half of their 32-byte
// loads straddle two cache lines, each then two loads.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace maskattn::detail {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept { return false; }
};

template <class T>
using LineVector = std::vector<T, CacheLineAllocator<T>>;
// Bytes on a cache line (a KV cache's contiguous K or V rows, its pages).
using LineBytes = LineVector<unsigned char>;

}  // namespace maskattn::detail
