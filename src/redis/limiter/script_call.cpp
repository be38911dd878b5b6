// The wire format of a limiter's script call (see script_call.hpp).
#include "script_call.hpp"

#include <utility>

#include "admit/redis/client/script.hpp"

namespace admit::redis::detail {

command batch_command(const limiter_algorithm& algorithm, const std::string& epoch_key, bool detect_lost_state,
                      const std::vector<batch_entry>& batch) {
  command c{"EVALSHA", algorithm.lua->sha1()};
  c.arg(batch.size() + 1).arg(epoch_key);
  for (const auto& e : batch) c.arg(e.state_key);
  c.arg(detect_lost_state ? std::string_view("1") : std::string_view("0"));
  for (const auto& p : algorithm.params) c.arg(p);
  for (const auto& e : batch) c.arg(e.n).arg(e.k);
  return c;
}

reply member_reply(const reply& r, std::size_t i, std::size_t m) {
  if (!r.is_array() || r.elements().size() != m + 3) return r;
  const auto& e = r.elements();
  if (!e[i].is_array()) return e[i];
  std::vector<reply> one = e[i].elements();
  one.push_back(e[m]);
  one.push_back(e[m + 1]);
  one.push_back(e[m + 2]);
  return reply::array(std::move(one));
}

std::optional<decision_reply> parse_decision(const reply& r, std::int64_t n, std::int64_t k, std::int64_t limit) {
  if (!r.is_array()) return std::nullopt;
  const auto& e = r.elements();
  if (e.size() != 8) return std::nullopt;
  for (std::size_t i : {0U, 1U, 2U, 3U, 4U, 5U, 7U}) {
    if (!e[i].is_integer()) return std::nullopt;
  }
  if (!e[6].is_string()) return std::nullopt;
  const std::int64_t admitted = e[0].integer();
  decision_reply d{admitted == 1,  e[1].integer(), e[2].integer(), e[3].integer(),
                   e[4].integer(), e[5].integer(), e[7].integer(), e[6].str()};
  const bool granted_ok = d.admitted
                              ? d.retry_after_us == 0 && (n == 0 ? d.granted == 0 : d.granted >= n && d.granted <= k)
                              : d.granted == 0;
  const bool shape_ok = (admitted == 0 || admitted == 1) && d.remaining >= 0 && d.remaining <= limit &&
                        d.retry_after_us >= -1 && d.reset_after_us >= 0 && d.now_us > 0 && d.epoch_seq >= 0;
  if (!shape_ok || !granted_ok) return std::nullopt;
  return d;
}

}  // namespace admit::redis::detail
