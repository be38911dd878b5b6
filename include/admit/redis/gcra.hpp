// admit/redis/gcra.hpp — a GCRA rate limiter whose state lives in Redis, shared by every process that uses the same
// name: the distributed form of admit::gcra (<admit/gcra.hpp>), returning the same admit::decision values.
//
//   admit::redis::gcra limiter(conn, "api", admit::rate::per_second(100), 20);   // 100/s per key, bursts of 20
//   if (auto r = limiter.decide("user:42"); !r.decision) reply_429(r.decision.retry_after);
//
// How it works. One Lua script (src/redis/lua/gcra.lua, embedded at build time, called with EVALSHA and loaded on
// NOSCRIPT) decides each request atomically on the server: it reads the time with Redis TIME (never a client's clock),
// reads the key's TAT (theoretical arrival time, integer microseconds since the Unix epoch), and on an admission
// writes the new TAT with an expiry at TAT, the moment the limiter is full again and the key stops carrying
// information. A refusal writes nothing. One round trip per decision, no compare-and-swap loop: a hot key cannot
// livelock, concurrent callers are serialized by Redis and pipelined by the connection.
//
// Storage. The key for `decide(key)` is "{name}:key": every key of one limiter shares the hash tag {name}, so a
// Redis Cluster keeps them in one slot (one node). Rate and burst travel as script arguments: a gcra constructed
// with the same name and new limits continues from the stored TAT (time already charged stays charged; remaining is
// recomputed with the new burst and interval).
//
// Units and rounding. The emission interval T = 1/rate is rounded up to whole microseconds (the script's unit; see
// gcra.lua for why not nanoseconds): the enforced rate is 1/ceil_us(T), slower than asked by less than 1 µs per
// request (under 0.1% for rates up to 1,000/s; rates above 1,000,000/s behave as 1,000,000/s). With that interval
// and the server's TIME, every decision equals admit::gcra's decide_at at the same time: the same admitted, limit,
// remaining, retry_after and reset_after, the durations being whole microseconds.
//
// Failures. Every decision has a deadline (gcra_options::timeout, the whole EVALSHA / SCRIPT LOAD / EVALSHA
// exchange). When it passes, or the connection fails, or Redis answers with an error, the decision is made by the
// failure policy (fail_closed: refuse; fail_open: admit) and comes with the error and consulted == false. A timeout
// or a lost connection leaves it unknown whether the script ran (and charged the request) on the server; it is never
// retried. Not built yet: a local fallback limiter with a share of the rate, a circuit breaker, token leasing.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "admit/decision.hpp"
#include "admit/rate.hpp"
#include "admit/redis/client.hpp"
#include "admit/redis/command.hpp"
#include "admit/redis/errc.hpp"
#include "admit/redis/reply.hpp"
#include "admit/redis/script.hpp"

namespace admit::redis {

// What a decision is when Redis could not make it (timeout, connection error, error reply).
enum class failure_policy {
  fail_closed,  // refuse (the default): over-admission is impossible, an outage refuses everyone
  fail_open,    // admit: an outage admits everyone, nothing is limited until Redis answers again
};

struct gcra_options {
  // The deadline of each decision, from its start: bounds EVALSHA and, after NOSCRIPT, SCRIPT LOAD and the retry.
  // Must be > 0 and finite.
  std::chrono::nanoseconds timeout = std::chrono::milliseconds(100);
  failure_policy on_failure = failure_policy::fail_closed;
  // retry_after of a fail_closed refusal (what a server would put in Retry-After during an outage). Must be >= 0.
  std::chrono::nanoseconds failure_retry_after = std::chrono::seconds(1);
};

// Why a decision was not made by Redis although the I/O succeeded.
enum class gcra_errc {
  error_reply = 1,  // Redis answered with an error (WRONGTYPE, OOM, READONLY, MOVED, ...): see gcra_result::message
  unexpected_reply = 2,  // the reply does not have the shape gcra.lua returns
};

namespace detail {
class gcra_errc_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "admit.redis.gcra"; }
  std::string message(int value) const override {
    switch (static_cast<gcra_errc>(value)) {
      case gcra_errc::error_reply:
        return "redis answered the gcra script with an error";
      case gcra_errc::unexpected_reply:
        return "unexpected reply from the gcra script";
    }
    return "unknown admit.redis.gcra error " + std::to_string(value);
  }
};
}  // namespace detail

inline const std::error_category& gcra_error_category() noexcept {
  static const detail::gcra_errc_category category;
  return category;
}
inline std::error_code make_error_code(gcra_errc e) noexcept { return {static_cast<int>(e), gcra_error_category()}; }

// One decision with how it was made.
struct gcra_result {
  // The answer: Redis's when consulted, else the failure policy's (or the infinite rate's, which needs no state).
  // A failure-policy decision: fail_closed {admitted false, remaining 0, retry_after = failure_retry_after,
  // reset_after 0}; fail_open {admitted true, remaining 0, retry_after 0, reset_after 0}; limit is the burst.
  admit::decision decision;
  // Empty when Redis decided (or for rate inf). Else why not: admit::redis::errc::timeout, errc::outcome_unknown
  // (the script may have run and charged the request), errc::closed, an Asio error (connection_refused,
  // operation_aborted when cancelled), gcra_errc::error_reply or gcra_errc::unexpected_reply.
  boost::system::error_code error;
  // True when the decision is Redis's (the script ran and its reply was read).
  bool consulted = false;
  // The Redis TIME the script used, in microseconds since the Unix epoch (zero when not consulted): the instant the
  // decision is about. For diagnostics and tests (replaying the local arithmetic at exactly that time).
  std::chrono::microseconds server_time{0};
  // The text of Redis's error reply for gcra_errc::error_reply; empty otherwise.
  std::string message;
};

namespace detail {

// The immutable configuration shared by a gcra and its operations in flight.
struct gcra_settings {
  std::string name;
  std::string prefix;  // "{name}:"
  rate r;
  std::int64_t burst = 1;
  bool inf = false;
  std::int64_t interval_us = 1;  // T rounded up to whole microseconds
  std::string interval_arg;      // ARGV[1], ARGV[2]
  std::string burst_arg;
  gcra_options options;
};

// Validates (std::invalid_argument naming the bad value) and derives the settings.
std::shared_ptr<const gcra_settings> make_gcra_settings(std::string name, rate r, std::int64_t burst,
                                                        gcra_options options);
// The embedded src/redis/lua/gcra.lua.
const script& gcra_script();
// EVALSHA gcra 1 {name}:key T burst n.
command gcra_command(const gcra_settings& s, std::string_view key, std::int64_t n);
// The result of a finished call: the script's decision, or the failure policy's with the error.
gcra_result gcra_interpret(const gcra_settings& s, const boost::system::error_code& ec, const reply& r);
// The decision of the infinite rate (no call).
gcra_result gcra_unlimited(const gcra_settings& s);
std::optional<std::chrono::steady_clock::time_point> gcra_deadline(const gcra_settings& s) noexcept;

// The asynchronous decision: EVALSHA (through script.hpp's evalsha_op: NOSCRIPT -> SCRIPT LOAD -> retry once) and
// interpretation. Detailed completes with (gcra_result), otherwise with (error_code, decision).
template <bool Detailed>
struct gcra_op {
  client* conn;
  std::shared_ptr<const gcra_settings> settings;
  command cmd;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool started = false;

  template <class Self>
  void operator()(Self& self) {
    if (started) return finish(self, gcra_unlimited(*settings));  // the infinite rate, after the post below
    started = true;
    if (settings->inf) {
      // Complete through the handler's executor, never inside the initiating call.
      boost::asio::post(std::move(self));
      return;
    }
    boost::asio::async_compose<Self, void(boost::system::error_code, reply)>(
        evalsha_op{conn, &gcra_script(), std::move(cmd), deadline}, self, conn->get_executor());
  }

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec, reply r) {
    finish(self, gcra_interpret(*settings, ec, r));
  }

  template <class Self>
  static void finish(Self& self, gcra_result result) {
    if constexpr (Detailed) {
      self.complete(std::move(result));
    } else {
      const boost::system::error_code ec = result.error;
      self.complete(ec, result.decision);
    }
  }
};

}  // namespace detail

// A distributed GCRA: rate r per key, bursts of up to `burst`, state in Redis under "{name}:key".
//
// Thread safety: every member may be called concurrently from any thread (the blocking ones not from a thread that
// runs the connection's executor). The gcra holds no state of its own besides its configuration; the connection must
// outlive it and its operations in flight (operations in flight keep the configuration alive themselves).
//
// Edge cases, for every decision: n == 0 is admitted and writes nothing (it reports remaining and reset_after);
// negative n is a contract violation (assert); n > burst is refused with retry_after == nanoseconds::max()
// (decision::exceeds_capacity(), as admit::gcra's oversize_policy::reject; the debt policy is not offered).
// rate::inf() admits everything without calling Redis (consulted == false, no error). Keys are binary-safe.
class gcra {
 public:
  // Throws std::invalid_argument naming the bad value: name empty or containing '{' or '}'; rate zero (a quota that
  // never refills would keep its key forever: use a counter); burst < 1; burst·T above 2^51 µs (~71 years: the
  // script's arithmetic must stay exact in doubles); options.timeout not > 0 or not finite (nanoseconds::max());
  // options.failure_retry_after < 0.
  gcra(client& conn, std::string name, rate r, std::int64_t burst, gcra_options options = {})
      : conn_(&conn), settings_(detail::make_gcra_settings(std::move(name), r, burst, std::move(options))) {}

  // Blocking: decides n for `key` within options().timeout (see gcra_result for the outcomes). Must not be called on
  // a thread that runs the connection's executor.
  [[nodiscard]] gcra_result decide(std::string_view key, std::int64_t n = 1) const;

  // Asynchronous: completion void(error_code, admit::decision). With an error the decision is the failure policy's
  // (with use_awaitable, wrap it in as_tuple: otherwise the error becomes an exception and the decision is lost). The
  // handler runs on its associated executor (the connection's by default), never inside this call. Cancellation:
  // terminal, through the handler's slot: completes with operation_aborted and the policy's decision (the script may
  // still run on the server).
  template <class CompletionToken>
  auto async_decide(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    return initiate<false, void(boost::system::error_code, admit::decision)>(key, n,
                                                                             std::forward<CompletionToken>(token));
  }
  // The same, completing with the whole result: void(gcra_result).
  template <class CompletionToken>
  auto async_decide_detailed(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    return initiate<true, void(gcra_result)>(key, n, std::forward<CompletionToken>(token));
  }

  // The Redis key that holds the state of `key`: "{name}:key".
  [[nodiscard]] std::string storage_key(std::string_view key) const {
    std::string k = settings_->prefix;
    k.append(key);
    return k;
  }

  [[nodiscard]] const std::string& name() const noexcept { return settings_->name; }
  [[nodiscard]] rate get_rate() const noexcept { return settings_->r; }
  [[nodiscard]] std::int64_t burst() const noexcept { return settings_->burst; }
  [[nodiscard]] const gcra_options& options() const noexcept { return settings_->options; }
  // The emission interval actually enforced: 1/rate rounded up to whole microseconds (0 for rate inf).
  [[nodiscard]] std::chrono::microseconds emission_interval() const noexcept {
    return std::chrono::microseconds{settings_->inf ? 0 : settings_->interval_us};
  }

 private:
  template <bool Detailed, class Signature, class CompletionToken>
  auto initiate(std::string_view key, std::int64_t n, CompletionToken&& token) const {
    assert(n >= 0 && "admit::redis::gcra: n must not be negative");
    return boost::asio::async_compose<CompletionToken, Signature>(
        detail::gcra_op<Detailed>{conn_, settings_, detail::gcra_command(*settings_, key, n),
                                  detail::gcra_deadline(*settings_)},
        token, conn_->get_executor());
  }

  client* conn_;
  std::shared_ptr<const detail::gcra_settings> settings_;
};

}  // namespace admit::redis

template <>
struct std::is_error_code_enum<admit::redis::gcra_errc> : std::true_type {};
