// serve/engine/lease_table.hpp — the permits of `admit serve`'s concurrency rules: who holds how many of a key's
// permits, under which lease id, until when.
//
//   lease_table leases{{.ttl = std::chrono::seconds(60)}};
//   auto a = leases.try_acquire(rule_id, "domain\x1fuser_alice", 4, 1, now_ns);   // a.lease: 32 hex digits
//   leases.release(a.lease, later_ns);
//
// A concurrency rule admits a hit when the key's permits in use plus the hit's n are at most the rule's limit; the
// admission is a lease, with an id the caller must give back (release) when its work is done. A caller that never
// releases (it crashed, its connection went away) does not hold the permits forever: a lease expires `ttl` after it
// was granted, and its permits are free from then on (expired leases are dropped by the next call that looks at the
// table: no timer, no thread). Times are the caller's `now` (Unix time, nanoseconds): a backwards step of the system
// clock only delays expiry.
//
// Lease ids are 128 random bits from std::random_device (the kernel's random source on Linux), in hex: a caller cannot
// guess another's lease to release it. The table holds at most max_leases leases; a hit that would need another is
// refused (table_full) until one is released or expires.
//
// Thread safety: every member may be called concurrently (one mutex: each call is O(log leases)).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace admit::serve {

class lease_table {
 public:
  struct options {
    std::chrono::nanoseconds ttl = std::chrono::seconds(60);  // > 0
    std::size_t max_leases = 1'000'000;                       // >= 1
  };
  struct acquired {
    bool admitted = false;
    bool table_full = false;                    // refused because the table holds max_leases leases
    std::uint64_t in_flight = 0;                // the key's permits in use after the call
    std::string lease;                          // admitted with n > 0: the lease id (empty for n == 0: nothing held)
    std::chrono::nanoseconds expires_after{0};  // admitted: until the lease expires (the ttl)
  };

  // Throws std::invalid_argument naming the value when ttl <= 0 or max_leases == 0.
  explicit lease_table(options opts);

  // Takes n of `limit` permits of `key` of the rule `owner` (an id the caller gives each rule), never waiting.
  [[nodiscard]] acquired try_acquire(std::uint64_t owner, std::string_view key, std::uint64_t limit, std::uint64_t n,
                                     std::int64_t now_ns);
  // Frees the lease's permits. False when no such lease is held (unknown, released already, or expired by now_ns).
  bool release(std::string_view lease, std::int64_t now_ns);
  // Drops every lease of `owner` (its rule was removed by a reload).
  void drop_owner(std::uint64_t owner);
  // Leases held (expired ones not yet dropped included).
  [[nodiscard]] std::size_t size() const;
  // Permits of `key` of `owner` in use (expired leases not yet dropped included).
  [[nodiscard]] std::uint64_t in_flight(std::uint64_t owner, std::string_view key) const;

 private:
  using expiry_map = std::multimap<std::int64_t, std::string>;
  struct lease {
    std::string held_key;  // key of held_
    std::uint64_t n = 0;
    expiry_map::iterator expiry;
  };
  static std::string held_key(std::uint64_t owner, std::string_view key);
  void expire(std::int64_t now_ns);
  void erase(std::unordered_map<std::string, lease>::iterator it);

  const options opts_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, lease> leases_;        // by id
  std::unordered_map<std::string, std::uint64_t> held_;  // permits in use by (owner, key)
  expiry_map expiry_;                                    // lease ids by expiry time
};

}  // namespace admit::serve
