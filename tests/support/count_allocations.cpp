// tests/support/count_allocations.cpp — the global operator new and delete of a test program that includes
// count_allocations.hpp, counting each allocation. A replacement operator new is defined once in a program, and not
// inline. Every unaligned form is replaced, plain and array, throwing and nothrow: a program that replaced only some
// would free with one allocator what the other allocated (std::stable_sort's buffer is nothrow-new'd; AddressSanitizer
// reports the mismatch). The aligned forms stay the library's, new and delete alike. GCC's -Wmismatched-new-delete
// cannot see that this operator new and operator delete are a matching malloc/free pair once they are inlined, hence
// the pragma.
#include "count_allocations.hpp"

#include <cstdlib>
#include <new>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  admit_test::allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  admit_test::allocation_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return ::operator new(size, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
