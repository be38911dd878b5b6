// tests/support/count_allocations.cpp — the global operator new and delete of a test program that includes
// count_allocations.hpp, counting each allocation. A replacement operator new is defined once in a program, and not
// inline. GCC's -Wmismatched-new-delete cannot see that this operator new and operator delete are a matching
// malloc/free pair once they are inlined, hence the pragma.
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
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
