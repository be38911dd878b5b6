// src/redis/limiter/script_call.hpp — the wire format of a limiter's script call (private to admit_redis), shared by
// the five algorithms (src/redis/lua/common.lua states the calling convention): the command for a batch of decisions,
// each decision's own reply cut out of the batch's, and the check of a decision's reply against what was asked.
//
//   command c = batch_command(algorithm, "{api}", false, batch);           // one EVALSHA for the whole batch
//   reply mine = member_reply(batch_reply, i, batch.size());              // {r_i..., now, epoch_id, epoch_seq}
//   if (auto d = parse_decision(mine, n, k, limit)) ...                   // std::nullopt: not a reply of ours
//
// Pure functions of their arguments: no I/O, no clock, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admit/redis/client/command.hpp"
#include "admit/redis/client/reply.hpp"
#include "admit/redis/limiter.hpp"
#include "batcher.hpp"

namespace admit::redis::detail {

// One decision's reply: {admitted, granted, remaining, retry_after_us (-1: never), reset_after_us, now_us, epoch_id,
// epoch_seq}. Durations and times in microseconds; now_us is the server's TIME since the Unix epoch.
struct decision_reply {
  bool admitted = false;
  std::int64_t granted = 0;
  std::int64_t remaining = 0;
  std::int64_t retry_after_us = 0;
  std::int64_t reset_after_us = 0;
  std::int64_t now_us = 0;
  std::int64_t epoch_seq = 0;
  std::string epoch_id;  // empty when lost-state detection is off
};

// EVALSHA of the algorithm's script for `batch`, in order. KEYS: the epoch, then one state key per decision; ARGV:
// detect (1/0), the algorithm's parameters, then n and k per decision.
[[nodiscard]] command batch_command(const limiter_algorithm& algorithm, const std::string& epoch_key,
                                    bool detect_lost_state, const std::vector<batch_entry>& batch);

// Decision i's own reply out of a batch of m's {r_1, ..., r_m, now, epoch_id, epoch_seq}: {r_i..., now, id, seq}, or
// r_i when it is an error reply (a failure of that decision alone). A reply of another shape (an error for the whole
// call, say) is returned as it is, for every decision to judge.
[[nodiscard]] reply member_reply(const reply& r, std::size_t i, std::size_t m);

// `r` read as a decision of n taking at most k, of a limiter whose decision.limit is `limit`; std::nullopt when it
// does not have the scripts' shape or contradicts the request (remaining outside [0, limit], an admission that granted
// fewer than n or more than k, or with a wait, a refusal that granted something).
[[nodiscard]] std::optional<decision_reply> parse_decision(const reply& r, std::int64_t n, std::int64_t k,
                                                           std::int64_t limit);

}  // namespace admit::redis::detail
