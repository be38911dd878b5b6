// tests/support/test_pch.hpp — the headers every test program includes, precompiled once per build (see
// tests/CMakeLists.txt). Only standard and third-party headers: a change to admit's own headers never invalidates it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>
