// The protocol between semaphore.lua and the C++ side, checked without a server: the script's named reply statuses
// (its `local GRANTED, QUEUED, ... = 0, 1, ...` line) are the numbers of core.hpp's sem_status, name by name.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core.hpp"

namespace {

namespace detail = admit::redis::detail;

// NAME -> number, from the script's one line that declares the statuses.
std::map<std::string, std::int64_t> script_statuses() {
  const std::string& source = detail::semaphore_script().source();
  std::smatch m;
  const std::regex line(R"(local (GRANTED(?:, [A-Z_]+)*) = ([0-9]+(?:, [0-9]+)*)\n)");
  if (!std::regex_search(source, m, line)) return {};
  std::vector<std::string> names;
  std::vector<std::int64_t> numbers;
  std::istringstream n(m[1].str()), v(m[2].str());
  for (std::string s; std::getline(n, s, ',');) names.push_back(s.substr(s.find_first_not_of(' ')));
  for (std::string s; std::getline(v, s, ',');) numbers.push_back(std::stoll(s));
  std::map<std::string, std::int64_t> out;
  for (std::size_t i = 0; i < names.size() && i < numbers.size(); ++i) out[names[i]] = numbers[i];
  return out;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

TEST(RedisSemaphoreProtocol, TheScriptsStatusesAreTheCppSides) {
  const auto lua = script_statuses();
  const std::map<std::string, std::int64_t> cpp = {
      {"granted", detail::granted}, {"queued", detail::queued},       {"unavailable", detail::unavailable},
      {"full", detail::full},       {"too_large", detail::too_large}, {"unknown", detail::unknown},
      {"left", detail::left},       {"conflict", detail::conflict},   {"too_late", detail::too_late}};
  ASSERT_EQ(lua.size(), cpp.size()) << "the script declares another number of statuses than sem_status has";
  for (const auto& [name, number] : cpp) {
    const auto it = lua.find(upper(name));
    ASSERT_NE(it, lua.end()) << "semaphore.lua has no status " << upper(name);
    EXPECT_EQ(it->second, number) << name;
  }
}

TEST(RedisSemaphoreProtocol, TheScriptRepliesWithNamedStatusesOnly) {
  // Every reply's status is one of the names: no bare number left where a status is meant.
  const std::string& source = detail::semaphore_script().source();
  EXPECT_FALSE(std::regex_search(source, std::regex(R"(return \{ [0-9], )"))) << "a reply with a bare status";
  EXPECT_FALSE(std::regex_search(source, std::regex(R"(with_grants\([0-9], )"))) << "a reply with a bare status";
}

}  // namespace
