// tests/support/count_allocations.hpp — counts the allocations of a test program, so that a test can show that a path
// allocates nothing (allocations() before and after). count_allocations.cpp replaces the global operator new and
// delete; admit_add_tests (cmake/testing.cmake) links it into every program one of whose sources includes this header.
#pragma once

#include <atomic>
#include <cstddef>

namespace admit_test {
inline std::atomic<std::size_t> allocation_count{0};
// Allocations by operator new so far, in every thread.
inline std::size_t allocations() noexcept { return allocation_count.load(std::memory_order_relaxed); }
}  // namespace admit_test
