// admit::redis::hash_slot and detail::route_of: where a Redis Cluster sends a command — the slot of its key (CRC16 of
// the key's hash tag, mod 16384, as Redis computes it) or, for a command without a key, any master or every master.
// Pure functions: no state, thread-safe.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admit/redis/client/cluster.hpp"

namespace admit::redis {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc16_table() noexcept {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000U) != 0 ? (crc << 1) ^ 0x1021U : crc << 1;
    table[i] = static_cast<std::uint16_t>(crc & 0xFFFFU);
  }
  return table;
}
constexpr std::array<std::uint16_t, 256> crc16_table = make_crc16_table();

}  // namespace

std::uint16_t hash_slot(std::string_view key) noexcept {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    if (const auto close = key.find('}', open + 1); close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  unsigned crc = 0;
  for (const char c : key) {
    crc = ((crc << 8) ^ crc16_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xFFU]) & 0xFFFFU;
  }
  return static_cast<std::uint16_t>(crc & 0x3FFFU);
}

namespace detail {
namespace {

bool iequals(std::string_view a, std::string_view upper) noexcept {
  if (a.size() != upper.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char c = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 'a' + 'A') : a[i];
    if (c != upper[i]) return false;
  }
  return true;
}

template <std::size_t N>
bool one_of(std::string_view a, const std::array<std::string_view, N>& names) noexcept {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return iequals(a, n); });
}

constexpr std::array<std::string_view, 6> script_calls = {"EVAL",       "EVALSHA", "EVAL_RO",
                                                          "EVALSHA_RO", "FCALL",   "FCALL_RO"};
constexpr std::array<std::string_view, 22> keyless = {
    "PING",   "ECHO",   "TIME",  "INFO",     "DBSIZE",    "LASTSAVE", "CLUSTER", "COMMAND",
    "CONFIG", "CLIENT", "HELLO", "SLOWLOG",  "LATENCY",   "ACL",      "DEBUG",   "RANDOMKEY",
    "WAIT",   "SCAN",   "KEYS",  "READONLY", "READWRITE", "LOLWUT"};

}  // namespace

route route_of(const command& cmd) noexcept {
  const auto& a = cmd.args();
  if (a.empty()) return {};
  const std::string_view name = a[0];
  if (one_of(name, script_calls)) {
    std::size_t numkeys = 0;
    if (a.size() >= 4) {
      const std::string& n = a[2];
      const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), numkeys);
      if (ec != std::errc{} || end != n.data() + n.size()) numkeys = 0;
    }
    return numkeys > 0 ? route{route_kind::keyed, a[3]} : route{};
  }
  if (iequals(name, "SCRIPT") || iequals(name, "FUNCTION")) {
    if (a.size() >= 2 && (iequals(a[1], "LOAD") || iequals(a[1], "FLUSH") ||
                          (iequals(name, "FUNCTION") && (iequals(a[1], "DELETE") || iequals(a[1], "RESTORE"))))) {
      return {route_kind::every_master, {}};
    }
    return {};
  }
  if (iequals(name, "FLUSHALL") || iequals(name, "FLUSHDB")) return {route_kind::every_master, {}};
  if (iequals(name, "OBJECT") || iequals(name, "MEMORY")) {
    return a.size() >= 3 ? route{route_kind::keyed, a[2]} : route{};
  }
  // LMPOP numkeys key ... / BLMPOP timeout numkeys key ... (and the ZSET forms): the first key.
  if (iequals(name, "LMPOP") || iequals(name, "ZMPOP")) return a.size() >= 3 ? route{route_kind::keyed, a[2]} : route{};
  if (iequals(name, "BLMPOP") || iequals(name, "BZMPOP")) {
    return a.size() >= 4 ? route{route_kind::keyed, a[3]} : route{};
  }
  if (a.size() < 2 || one_of(name, keyless)) return {};
  return {route_kind::keyed, a[1]};
}

}  // namespace detail
}  // namespace admit::redis
