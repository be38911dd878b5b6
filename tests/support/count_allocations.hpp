// tests/support/count_allocations.hpp — replaces the global operator new and delete of a test program with ones that
// count allocations, so that a test can show that a path allocates nothing (allocations() before and after).
// Include it in ONE translation unit of a program only (each test program is one): a replacement operator new may be
// defined once, and not inline. GCC's -Wmismatched-new-delete cannot see that this operator new and operator delete
// are a matching malloc/free pair once they are inlined, hence the pragma.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace admit_test {
inline std::atomic<std::size_t> allocation_count{0};
// Allocations by operator new so far, in every thread.
inline std::size_t allocations() noexcept { return allocation_count.load(std::memory_order_relaxed); }
}  // namespace admit_test

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  admit_test::allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
