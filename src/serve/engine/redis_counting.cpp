// `admit serve`'s Redis backend (see redis_backend.hpp): the counting — envoyproxy/ratelimit's fixed window as batched
// script calls, admit::redis limiters for the other algorithms (concurrency: redis_concurrency.cpp).
#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "admit/rate.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"
#include "serve/engine/redis_backend_state.hpp"
#include "serve/engine/redis_scripts.hpp"

namespace admit::serve {

using detail::charges_refused;
using detail::effective_limit;
using detail::hex;
using detail::limit_of;
using detail::limiter_problem;
using detail::limiter_slot;
using detail::pending_request;
using detail::steady;
using detail::window_hit;
using std::chrono::seconds;

namespace detail {

// What keeps a rule from being decided by an admit::redis limiter (their constructors' ranges), if anything.
std::optional<std::string> limiter_problem(algorithm a, std::uint32_t requests, unit per,
                                           std::optional<std::uint32_t> burst) {
  constexpr double max_us = static_cast<double>(std::int64_t{1} << 51);
  const double window_us = static_cast<double>(unit_seconds(per)) * 1e6;
  if (unit_seconds(per) <= 0) return "no unit";
  if (requests == 0) return std::nullopt;  // refuses everything without Redis
  if (a == algorithm::sliding_window) {
    if (requests > redis::sliding_window::max_limit) {
      return "requests_per_unit " + std::to_string(requests) + " is above the sliding window's largest limit " +
             std::to_string(redis::sliding_window::max_limit);
    }
    if (static_cast<double>(requests) * window_us > max_us) {
      return "requests_per_unit " + std::to_string(requests) + " per " + std::string(to_string(per)) +
             " is beyond the sliding window's range on Redis (limit x window in microseconds must be at most 2^51)";
    }
  } else if (a == algorithm::gcra || a == algorithm::token_bucket) {
    const double b = static_cast<double>(burst.value_or(requests));
    if (b < 1) return "burst must be at least 1";
    if (b * std::ceil(window_us / static_cast<double>(requests)) > max_us) {
      return "burst " + std::to_string(burst.value_or(requests)) + " at " + std::to_string(requests) + " per " +
             std::string(to_string(per)) + " is beyond " + std::string(to_string(a)) +
             "'s range on Redis (burst x interval in microseconds must be at most 2^51)";
    }
  }
  return std::nullopt;
}

}  // namespace detail

// ---- fixed windows ----

// A queue this large leaves at once, without waiting for the flush: Redis works on it while this process completes
// (and queues) the next decisions. As admit::redis's limiters (src/redis/limiter/batcher.hpp): 8 measured best there,
// and here too (bench/serve_redis_bench.cpp: at 16 callers, waiting for the flush keeps one call in flight at a time).
// A smaller queue leaves at the flush the first hit posts when no call is in flight, else at the next call's
// completion: while Redis works, the hits gather (one read and one write of Redis for many decisions, where each
// hit leaving on its own costs Redis a read, a write and a wake-up for one or two).
constexpr std::size_t stream_batch = 8;

void redis_backend::state::take_prefetched(window_hit&& w, std::vector<window_hit>& out) {
  const auto p = stock.take(w.key, w.n, w.prefetch, w.limit, !w.drop, w.window_end_s, w.now_s, &w);
  if (p.waiting) return;
  if (p.served || p.refused) {  // from this instance's stock, or a full window a reply showed
    hit_outcome o;
    o.limit = w.limit;
    o.result = p.refused ? hit_outcome::state::over_limit : hit_outcome::state::ok;
    // What is left, as far as this instance knows: its stock, and the room the last reply showed.
    const std::uint64_t room = p.known < w.limit ? w.limit - p.known : 0;
    o.remaining = p.refused ? 0 : static_cast<std::uint32_t>(std::min<std::uint64_t>(w.limit, p.left + room));
    o.count_after = p.refused ? p.known + w.n : w.limit - o.remaining;
    o.reset_after = w.reset_after;
    o.consulted = false;
    w.req->finish(w.index, std::move(o));
    return;
  }
  w.take = p.take;
  w.refill = p.refill;
  out.push_back(std::move(w));
}

void redis_backend::state::resume(std::vector<window_hit> waiters, const std::string& error) {
  if (waiters.empty()) return;
  if (!error.empty()) {  // they would have gone to the same Redis, in the same call
    for (window_hit& w : waiters) w.req->fail(w.index, error);
    return;
  }
  std::vector<window_hit> again;
  for (window_hit& w : waiters) take_prefetched(std::move(w), again);
  if (!again.empty()) submit(std::move(again));
}

void redis_backend::state::submit(std::vector<window_hit> hits) {
  std::vector<window_hit> full;
  bool schedule = false;
  {
    const admit::detail::lock_guard lock(queue_mutex);
    for (auto& h : hits) queue.push_back(std::move(h));
    if (queue.size() >= std::min(opts.max_batch, stream_batch)) {
      full.swap(queue);
    } else if (!flush_scheduled && (calls_in_flight == 0 || clustered.load(std::memory_order_acquire))) {
      // (else the next call's completion flushes; on a cluster a call stuck on one node must not hold the others')
      flush_scheduled = schedule = true;
    }
  }
  if (!full.empty()) send_all(std::move(full));
  if (schedule) boost::asio::post(ex, [self = shared_from_this()] { self->flush(); });
}

redis_backend::state::in_flight::in_flight(state& s) : owner(s) {
  const admit::detail::lock_guard lock(owner.queue_mutex);
  ++owner.calls_in_flight;
}

redis_backend::state::in_flight::~in_flight() {
  if (!made) owner.call_done();  // the call threw before it was made: its completion will not come
}

void redis_backend::state::call_done() {
  bool schedule = false;
  {
    const admit::detail::lock_guard lock(queue_mutex);
    --calls_in_flight;
    if (!queue.empty() && !flush_scheduled) flush_scheduled = schedule = true;
  }
  if (schedule) boost::asio::post(ex, [self = shared_from_this()] { self->flush(); });
}

void redis_backend::state::flush() {
  std::vector<window_hit> batch;
  {
    const admit::detail::lock_guard lock(queue_mutex);
    flush_scheduled = false;
    batch.swap(queue);
  }
  if (!batch.empty()) send_all(std::move(batch));
}

void redis_backend::state::send_all(std::vector<window_hit> batch) {
  steady::time_point earliest = batch.front().deadline;
  for (const auto& h : batch) earliest = std::min(earliest, h.deadline);
  with_client(earliest, [self = shared_from_this(), batch = std::move(batch)](redis::client* c,
                                                                              const std::string& error) mutable {
    if (c == nullptr) {
      for (auto& h : batch) self->fail_window_hit(h, error);
      return;
    }
    if (!self->clustered.load(std::memory_order_acquire)) {
      const auto scripted = std::stable_partition(batch.begin(), batch.end(), plain);
      std::vector<window_hit> rest(std::make_move_iterator(scripted), std::make_move_iterator(batch.end()));
      batch.erase(scripted, batch.end());
      if (!batch.empty()) self->send_plain(std::move(batch));
      if (!rest.empty()) self->send_chunks(*c, std::move(rest));
      return;
    }
    // A cluster: one call per hash slot (a script's keys must share one).
    std::map<std::uint16_t, std::vector<window_hit>> by_slot;
    for (auto& h : batch) by_slot[redis::hash_slot(h.key)].push_back(std::move(h));
    for (auto& [slot, hits] : by_slot) self->send_chunks(*c, std::move(hits));
  });
}

void redis_backend::state::send_chunks(redis::client& c, std::vector<window_hit> hits) {
  for (std::size_t from = 0; from < hits.size(); from += opts.max_batch) {
    const std::size_t to = std::min(hits.size(), from + opts.max_batch);
    send(c, std::vector<window_hit>(std::make_move_iterator(hits.begin() + static_cast<std::ptrdiff_t>(from)),
                                    std::make_move_iterator(hits.begin() + static_cast<std::ptrdiff_t>(to))));
  }
}

void redis_backend::state::send(redis::client& c, std::vector<window_hit> hits) {
  const redis::script& s = detail::fixed_window_script();
  redis::command cmd{"EVALSHA", s.sha1()};
  cmd.arg(hits.size());
  steady::time_point earliest = hits.front().deadline;
  for (const auto& h : hits) {
    cmd.arg(h.key);
    earliest = std::min(earliest, h.deadline);
  }
  for (const auto& h : hits) {
    cmd.arg(h.n).arg(h.expire_seconds).arg(h.limit).arg(h.drop ? std::string_view("drop") : std::string_view("count"));
    cmd.arg(h.take);
  }
  in_flight counted_call(*this);
  call_script(c, s, std::move(cmd), earliest,
              [self = shared_from_this(), hits = std::make_shared<std::vector<window_hit>>(std::move(hits))](
                  boost::system::error_code ec, const redis::reply& r) {
                self->call_done();
                self->counted(*hits, ec, r);
              });
  counted_call.started();
}

void redis_backend::state::counted(std::vector<window_hit>& hits, boost::system::error_code ec, const redis::reply& r) {
  std::string whole;  // why the whole call failed
  if (ec) {
    whole = failure_text(std::error_code(ec));
  } else if (r.is_error()) {
    whole = reply_text(r);
  } else if (!r.is_array() || r.elements().size() != hits.size()) {
    whole = "Redis at " + address + ": unexpected reply to the fixed-window script";
  }
  for (std::size_t i = 0; i < hits.size(); ++i) {
    window_hit& h = hits[i];
    if (!whole.empty()) {
      fail_window_hit(h, whole);
      continue;
    }
    const redis::reply& e = r.elements()[i];
    const bool shaped = e.is_array() && e.elements().size() == 2 && e.elements()[0].is_integer() &&
                        e.elements()[1].is_integer() && e.elements()[0].integer() >= 0 &&
                        e.elements()[1].integer() >= 0 && e.elements()[1].integer() <= h.take - h.n;
    if (!shaped) {
      fail_window_hit(
          h, e.is_error() ? reply_text(e) : "Redis at " + address + ": counter " + h.key + " does not hold a count");
      continue;
    }
    const auto after = static_cast<std::uint64_t>(e.elements()[0].integer());
    const auto extra = static_cast<std::uint32_t>(e.elements()[1].integer());
    // The script adds a refill's surplus only up to the limit, and a dropped hit not at all.
    finish_window_hit(h, after, extra, after > h.limit && h.drop ? after - h.n : after + extra);
  }
}

void redis_backend::state::fail_window_hit(window_hit& h, const std::string& why) {
  h.req->fail(h.index, why);
  if (h.refill) resume(stock.refilled(h.key, 0), why);
}

void redis_backend::state::finish_window_hit(window_hit& h, std::uint64_t count_after, std::uint32_t extra,
                                             std::uint64_t holds) {
  // The stock first (a stock a reload dropped must not be recreated by learned() and take this refill's hits), then
  // what the reply showed, then the hits that waited for this refill.
  std::vector<window_hit> waiters;
  if (h.refill) waiters = stock.refilled(h.key, extra);
  if (h.window_end_s != 0) stock.learned(h.key, holds, h.window_end_s);
  // envoyproxy/ratelimit's decision: over iff the count after the hit exceeds the limit.
  hit_outcome o;
  o.limit = h.limit;
  o.count_after = count_after;
  const bool over = o.count_after > h.limit;
  o.result = over ? hit_outcome::state::over_limit : hit_outcome::state::ok;
  o.remaining = over ? 0 : static_cast<std::uint32_t>(h.limit - o.count_after);
  o.reset_after = h.reset_after;
  h.req->finish(h.index, std::move(o));
  resume(std::move(waiters), {});
}

// The counters' commands, as envoyproxy/ratelimit's: INCRBY, then EXPIRE in the same write. EXPIRE ... NX sets the
// expiry only when the counter has none, i.e. when it was just created, as the script does (envoyproxy/ratelimit
// sets it again at every hit); Redis runs it at no cost on a counter that has one. One INCRBY per counter of the
// batch with the sum of its hits, each hit answered in its order in the batch: the INCRBY's result minus the hits
// after it (the count each would have seen had it been sent alone, one after the other).
void redis_backend::state::send_plain(std::vector<window_hit> hits) {
  // The hits grouped by counter without a map: their indexes, sorted by key (stably: a counter's hits keep their order
  // in the batch), then one counter per run of equal keys.
  std::vector<std::size_t> order(hits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&hits](std::size_t x, std::size_t y) { return hits[x].key < hits[y].key; });
  std::vector<std::size_t> counter_of(hits.size());
  std::vector<plain_counter> counters;
  steady::time_point earliest = hits.front().deadline;
  for (std::size_t at = 0; at < order.size(); ++at) {
    const window_hit& h = hits[order[at]];
    earliest = std::min(earliest, h.deadline);
    if (at == 0 || h.key != hits[order[at - 1]].key) counters.push_back({.reply = 0, .hits = 0, .first = order[at]});
    counter_of[order[at]] = counters.size() - 1;
    counters.back().hits += h.take;
  }
  redis::pipeline commands;
  commands.reserve(counters.size() * (hits.front().key.size() + 64) * 2);
  for (plain_counter& counter : counters) {
    const window_hit& first = hits[counter.first];
    counter.reply = commands.size();
    if (counter.hits == 0) {  // only questions (hits_addend 0): nothing is created
      commands.add("GET", first.key);
    } else {
      commands.add("INCRBY", first.key, counter.hits).add("EXPIRE", first.key, first.expire_seconds, "NX");
    }
  }
  redis::connection& c = *conn;
  in_flight counted_call(*this);
  const std::size_t replies = commands.size();
  call_guarded(
      [self = shared_from_this(), hits = std::make_shared<std::vector<window_hit>>(std::move(hits)),
       counter_of = std::move(counter_of), counters = std::move(counters),
       replies](boost::system::error_code ec, const redis::reply& r) {
        self->call_done();
        self->counted_plain(*hits, counter_of, counters, replies, ec, r);
      },
      [&](auto reported) { c.async_execute_pipeline_until(earliest, std::move(commands), std::move(reported)); });
  counted_call.started();
}

void redis_backend::state::counted_plain(std::vector<window_hit>& hits, const std::vector<std::size_t>& counter_of,
                                         const std::vector<plain_counter>& counters, std::size_t replies,
                                         boost::system::error_code ec, const redis::reply& r) {
  std::string whole;  // why the whole pipeline failed
  if (ec) {
    whole = failure_text(std::error_code(ec));
  } else if (!r.is_array() || r.elements().size() != replies) {
    whole = "Redis at " + address + ": unexpected reply to the fixed-window commands";
  }
  std::vector<std::uint64_t> answered(counters.size());  // per counter: the hits of the batch added so far
  for (std::size_t i = 0; i < hits.size(); ++i) {
    window_hit& h = hits[i];
    if (!whole.empty()) {
      fail_window_hit(h, whole);
      continue;
    }
    const plain_counter& counter = counters[counter_of[i]];
    const redis::reply& e = r.elements()[counter.reply];
    std::optional<std::int64_t> count;  // the counter after every hit of the batch on it
    if (e.is_integer()) {
      count = e.integer();
    } else if (e.is_nil()) {
      count = 0;
    } else if (e.is_string()) {  // GET
      std::int64_t v = 0;
      const char* end = e.str().data() + e.str().size();
      if (const auto [at, err] = std::from_chars(e.str().data(), end, v); err == std::errc() && at == end) count = v;
    }
    if (!count || *count < 0 || static_cast<std::uint64_t>(*count) < counter.hits) {
      fail_window_hit(h, e.is_error() ? reply_text(e) + " for the counter " + h.key
                                      : "Redis at " + address + ": counter " + h.key + " does not hold a count");
      continue;
    }
    // The EXPIRE after an INCRBY: refused (EXPIRE ... NX needs Redis 7.0), the counter would never expire.
    if (const redis::reply* expire = counter.hits > 0 ? &r.elements()[counter.reply + 1] : nullptr;
        expire != nullptr && expire->is_error()) {
      fail_window_hit(h, reply_text(*expire) + " to EXPIRE " + h.key + " NX (admit serve needs Redis 7.0 or later)");
      continue;
    }
    // The count this hit found, its own n after it; then what its take added beyond n.
    const std::uint64_t before = static_cast<std::uint64_t>(*count) - counter.hits + answered[counter_of[i]];
    answered[counter_of[i]] += h.take;
    const std::uint64_t after = before + h.n;
    // A refill's surplus is its stock as far as it fits under the limit (as the script takes it: the same hits are
    // admitted); beyond the limit it only counts, and the reply shows the window full.
    const auto extra = static_cast<std::uint32_t>(
        after < h.limit ? std::min<std::uint64_t>(h.take - h.n, h.limit - after) : std::uint64_t{0});
    finish_window_hit(h, after, extra, before + h.take);
  }
}

// ---- the other algorithms ----

std::shared_ptr<redis::limiter> redis_backend::state::limiter_for(redis::client& c, const hit& h, std::string& error) {
  const effective_limit l = limit_of(h);
  const std::optional<std::uint32_t> burst = h.override_limit ? std::nullopt : h.rule->burst;
  const bool charge = charges_refused(*h.rule);
  const std::uint32_t prefetch = h.override_limit ? 1 : h.rule->prefetch;
  std::string name = signature(h.rule->algorithm, l.requests, l.per, burst, charge);
  std::string slot = limiter_slot(name, prefetch);
  const admit::detail::lock_guard lock(limiters_mutex);
  if (auto it = limiters.find(slot); it != limiters.end()) return it->second;
  if (limiters.size() >= opts.max_limiters) {
    error = "too many distinct limits on Redis (max_limiters " + std::to_string(opts.max_limiters) + ")";
    return nullptr;
  }
  if (auto problem = limiter_problem(h.rule->algorithm, l.requests, l.per, burst)) {
    error = h.rule->full_key + ": " + *problem;
    return nullptr;
  }
  redis::limiter_options lo;
  lo.timeout = opts.timeout;
  lo.max_batch = opts.max_batch;
  lo.on_failure = redis::failure_policy::fail_closed;  // the error is reported; the service applies its policy
  lo.breaker = opts.breaker;
  lo.charge_refused = charge;
  const seconds window(unit_seconds(l.per));
  // prefetch: the library's token leasing — up to `prefetch` tokens taken at once, spent here within the rule's unit
  // (then dropped: they were charged, so dropping them only refuses more — at most prefetch − 1 a unit, as a fixed
  // window's stock).
  if (prefetch > 1) {
    lo.lease = prefetch;
    lo.lease_ttl = window;
  }
  const std::int64_t b = burst.value_or(l.requests);
  std::shared_ptr<redis::limiter> made;
  try {
    switch (h.rule->algorithm) {
      case algorithm::sliding_window:
        made = std::make_shared<redis::sliding_window>(c, name, l.requests, window, lo);
        break;
      case algorithm::gcra:
        made = std::make_shared<redis::gcra>(c, name, rate::per(l.requests, window), b, lo);
        break;
      case algorithm::token_bucket:
        made = std::make_shared<redis::token_bucket>(c, name, rate::per(l.requests, window), b, lo);
        break;
      default:
        error = "no admit::redis limiter for " + std::string(to_string(h.rule->algorithm));
        return nullptr;
    }
  } catch (const std::invalid_argument& e) {
    error = h.rule->full_key + ": " + e.what();
    return nullptr;
  }
  limiters.emplace(std::move(slot), made);
  return made;
}

std::string redis_backend::state::signature(algorithm a, std::uint32_t requests, unit per,
                                            std::optional<std::uint32_t> burst, bool charge) const {
  return opts.key_prefix + std::string(to_string(a)) + ":" + std::to_string(requests) + "/" +
         std::string(to_string(per)) + ":" + std::to_string(burst.value_or(requests)) + (charge ? ":count" : "");
}

void redis_backend::state::decide_on_limiter(redis::client& c, const std::shared_ptr<pending_request>& req,
                                             std::size_t i, const hit& h) {
  const effective_limit l = limit_of(h);
  std::string error;
  auto lim = limiter_for(c, h, error);
  if (!lim) return req->fail(i, error);
  lim->async_decide_detailed(
      h.counter_key, h.n,
      [self = shared_from_this(), req, i, lim, n = h.n, limit = l.requests,
       per = std::chrono::seconds{unit_seconds(l.per)}](const redis::limiter_result& r) {
        if (r.error) {
          return req->fail(i, r.message.empty() ? self->failure_text(r.error)
                                                : "Redis at " + self->address + " answered " + r.message);
        }
        hit_outcome o;
        o.limit = limit;
        o.consulted = r.consulted;
        const auto used =
            static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.decision.limit - r.decision.remaining));
        if (r.decision.admitted) {
          o.result = hit_outcome::state::ok;
          o.reset_after = r.decision.reset_after;
          o.remaining = static_cast<std::uint32_t>(std::clamp<std::int64_t>(r.decision.remaining, 0, limit));
          o.count_after = used;
        } else {
          o.result = hit_outcome::state::over_limit;
          o.reset_after = refused_reset_after(r.decision, per);
          o.count_after = used + n;
        }
        req->finish(i, std::move(o));
      });
}

}  // namespace admit::serve
