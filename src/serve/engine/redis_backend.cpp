// `admit serve`'s Redis backend (see redis_backend.hpp).
#include "serve/engine/redis_backend.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "admit/rate.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"
#include "serve/engine/redis_scripts.hpp"

namespace admit::serve {

namespace {

using steady = std::chrono::steady_clock;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// The outcomes of one decide() call, filled in by its hits' calls (each writes its own slot) and delivered when the
// last one is in.
struct pending_request {
  pending_request(std::size_t n, backend::completion d) : outcomes(n), left(n), done(std::move(d)) {}
  std::vector<hit_outcome> outcomes;
  std::atomic<std::size_t> left;
  backend::completion done;

  void finish(std::size_t i, hit_outcome o) {
    outcomes[i] = std::move(o);
    if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) done(std::move(outcomes));
  }
  void fail(std::size_t i, std::string why) {
    hit_outcome o;
    o.result = hit_outcome::state::failed;
    o.error = std::move(why);
    finish(i, std::move(o));
  }
};

// One fixed-window hit waiting for, or riding in, a script call.
struct window_hit {
  std::shared_ptr<pending_request> req;
  std::size_t index = 0;
  std::string key;
  std::uint32_t n = 0;
  std::int64_t expire_seconds = 0;
  std::uint32_t limit = 0;
  nanoseconds reset_after{0};
  steady::time_point deadline;
};

// The limit a hit is decided against: the caller's override, else the rule's.
struct effective_limit {
  std::uint32_t requests = 0;
  unit per = unit::unknown;
};
effective_limit limit_of(const hit& h) {
  if (h.override_limit && h.rule->algorithm != algorithm::concurrency) {
    return {h.override_limit->requests_per_unit, h.override_limit->per};
  }
  return {h.rule->requests_per_unit, h.rule->per};
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(digits[u >> 4]);
    out.push_back(digits[u & 15]);
  }
  return out;
}

std::optional<std::string> unhex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  const auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = value(text[i]), lo = value(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// 128 random bits in hex: a lease's identity.
std::string random_id() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  const std::uint64_t a = engine(), b = engine();
  std::string bytes(16, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((a >> (8 * i)) & 0xff);
    bytes[static_cast<std::size_t>(8 + i)] = static_cast<char>((b >> (8 * i)) & 0xff);
  }
  return hex(bytes);
}

// Leases: "cc1.<hex of the counter key>.<random id>", so that any process can find the counter a lease is of.
constexpr std::string_view lease_format = "cc1.";

// The server, for messages: never the password.
std::string address_of(const redis::connection_options& o) {
  if (!o.sentinel.master_name.empty()) return "master \"" + o.sentinel.master_name + "\" (Sentinel)";
  if (!o.unix_path.empty()) return o.unix_path;
  if (o.host.find(':') != std::string::npos) return "[" + o.host + "]:" + std::to_string(o.port);
  return o.host + ":" + std::to_string(o.port);
}

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

}  // namespace

struct redis_backend::state : std::enable_shared_from_this<state> {
  using resolved = std::function<void(redis::client*, const std::string& error)>;

  state(boost::asio::any_io_executor executor, redis_backend_options o)
      : ex(std::move(executor)), opts(std::move(o)), node_options(redis::parse_url(opts.url)) {
    if (opts.key_prefix.find_first_of("{}") != std::string::npos) {
      throw std::invalid_argument("admit serve --redis: the key prefix must not contain '{' or '}', got \"" +
                                  opts.key_prefix + "\"");
    }
    if (opts.timeout <= opts.timeout.zero()) throw std::invalid_argument("admit serve --redis: timeout must be > 0");
    if (opts.max_batch < 1) throw std::invalid_argument("admit serve --redis: max_batch must be >= 1");
    if (opts.lease_ttl <= opts.lease_ttl.zero()) {
      throw std::invalid_argument("admit serve --redis: lease_ttl must be > 0");
    }
    if (opts.max_limiters < 1) throw std::invalid_argument("admit serve --redis: max_limiters must be >= 1");
    address = address_of(node_options);
    const bool single = !node_options.unix_path.empty() || !node_options.sentinel.master_name.empty();
    if (opts.mode == redis_backend_options::topology::cluster && !single) {
      nodes = std::make_unique<redis::cluster>(ex, std::vector<redis::connection_options>{node_options});
      target.store(nodes.get());
    } else {
      conn = std::make_unique<redis::connection>(ex, node_options);
      if (opts.mode != redis_backend_options::topology::automatic || single) target.store(conn.get());
    }
  }

  boost::asio::any_io_executor ex;
  redis_backend_options opts;
  redis::connection_options node_options;
  std::string address;
  std::unique_ptr<redis::connection> conn;      // the URL's server (the client, unless it is a cluster node)
  std::unique_ptr<redis::cluster> nodes;        // when the URL's server is a cluster node
  std::atomic<redis::client*> target{nullptr};  // null until the topology is known

  std::mutex topology_mutex;
  bool probing = false;
  std::vector<resolved> waiting;  // decisions waiting for the topology

  std::mutex limiters_mutex;
  std::unordered_map<std::string, std::shared_ptr<redis::limiter>> limiters;

  std::mutex queue_mutex;
  std::vector<window_hit> queue;
  bool flush_scheduled = false;

  // ---- the client, once the topology is known ----

  // Calls `then` with the client (at once when known), or with why it is not known (INFO cluster failed).
  void with_client(steady::time_point deadline, resolved then) {
    redis::client* known = target.load(std::memory_order_acquire);
    if (known == nullptr) {
      const std::lock_guard lock(topology_mutex);
      known = target.load(std::memory_order_acquire);
      if (known == nullptr) {
        waiting.push_back(std::move(then));
        if (probing) return;
        probing = true;
      }
    }
    if (known != nullptr) return then(known, {});
    conn->async_execute_until(
        deadline, "INFO", "cluster",
        [self = shared_from_this()](boost::system::error_code ec, redis::reply r) { self->learned_topology(ec, r); });
  }

  void learned_topology(boost::system::error_code ec, const redis::reply& r) {
    std::vector<resolved> ready;
    std::string error;
    redis::client* c = nullptr;
    {
      const std::lock_guard lock(topology_mutex);
      probing = false;
      ready.swap(waiting);
      if (ec) {
        error = failure_text(std::error_code(ec));
      } else {
        // A server that does not answer INFO (an ACL user without it) is taken as a single server.
        if (!r.is_error() && r.str().find("cluster_enabled:1") != std::string::npos) {
          nodes = std::make_unique<redis::cluster>(ex, std::vector<redis::connection_options>{node_options});
          target.store(nodes.get(), std::memory_order_release);
        } else {
          target.store(conn.get(), std::memory_order_release);
        }
        c = target.load();
      }
    }
    for (auto& then : ready) then(c, error);
  }

  // "Redis at host:port: timeout (connection refused)".
  std::string failure_text(const std::error_code& ec) const {
    std::string s = "Redis at " + address + ": " + ec.message();
    if (conn && !nodes) {  // a single server: say why it is not connected
      if (const std::error_code why = conn->last_connect_error(); why && why != ec) s += " (" + why.message() + ")";
    }
    return s;
  }
  std::string reply_text(const redis::reply& r) const { return "Redis at " + address + " answered " + r.str(); }

  steady::time_point deadline() const { return steady::now() + opts.timeout; }

  // ---- fixed windows ----

  void submit(std::vector<window_hit> hits) {
    std::vector<window_hit> full;
    bool schedule = false;
    {
      const std::lock_guard lock(queue_mutex);
      for (auto& h : hits) queue.push_back(std::move(h));
      if (queue.size() >= opts.max_batch) {
        full.swap(queue);
      } else if (!flush_scheduled) {
        flush_scheduled = schedule = true;
      }
    }
    if (!full.empty()) send_all(std::move(full));
    if (schedule) boost::asio::post(ex, [self = shared_from_this()] { self->flush(); });
  }

  void flush() {
    std::vector<window_hit> batch;
    {
      const std::lock_guard lock(queue_mutex);
      flush_scheduled = false;
      batch.swap(queue);
    }
    if (!batch.empty()) send_all(std::move(batch));
  }

  void send_all(std::vector<window_hit> batch) {
    steady::time_point earliest = batch.front().deadline;
    for (const auto& h : batch) earliest = std::min(earliest, h.deadline);
    with_client(earliest, [self = shared_from_this(), batch = std::move(batch)](redis::client* c,
                                                                                const std::string& error) mutable {
      if (c == nullptr) {
        for (auto& h : batch) h.req->fail(h.index, error);
        return;
      }
      if (c != self->nodes.get()) return self->send_chunks(*c, std::move(batch));
      // A cluster: one call per hash slot (a script's keys must share one).
      std::map<std::uint16_t, std::vector<window_hit>> by_slot;
      for (auto& h : batch) by_slot[redis::hash_slot(h.key)].push_back(std::move(h));
      for (auto& [slot, hits] : by_slot) self->send_chunks(*c, std::move(hits));
    });
  }

  void send_chunks(redis::client& c, std::vector<window_hit> hits) {
    for (std::size_t from = 0; from < hits.size(); from += opts.max_batch) {
      const std::size_t to = std::min(hits.size(), from + opts.max_batch);
      send(c, std::vector<window_hit>(std::make_move_iterator(hits.begin() + static_cast<std::ptrdiff_t>(from)),
                                      std::make_move_iterator(hits.begin() + static_cast<std::ptrdiff_t>(to))));
    }
  }

  void send(redis::client& c, std::vector<window_hit> hits) {
    const redis::script& s = detail::fixed_window_script();
    redis::command cmd{"EVALSHA", s.sha1()};
    cmd.arg(hits.size());
    steady::time_point earliest = hits.front().deadline;
    for (const auto& h : hits) {
      cmd.arg(h.key);
      earliest = std::min(earliest, h.deadline);
    }
    for (const auto& h : hits) cmd.arg(h.n).arg(h.expire_seconds);
    call_script(c, s, std::move(cmd), earliest,
                [self = shared_from_this(), hits = std::make_shared<std::vector<window_hit>>(std::move(hits))](
                    boost::system::error_code ec, const redis::reply& r) { self->counted(*hits, ec, r); });
  }

  void counted(std::vector<window_hit>& hits, boost::system::error_code ec, const redis::reply& r) {
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
        h.req->fail(h.index, whole);
        continue;
      }
      const redis::reply& e = r.elements()[i];
      if (!e.is_integer() || e.integer() < 0) {
        h.req->fail(h.index, e.is_error() ? reply_text(e)
                                          : "Redis at " + address + ": counter " + h.key + " does not hold a count");
        continue;
      }
      // envoyproxy/ratelimit's decision: over iff the count after the hit exceeds the limit.
      hit_outcome o;
      o.limit = h.limit;
      o.count_after = static_cast<std::uint64_t>(e.integer());
      const bool over = o.count_after > h.limit;
      o.result = over ? hit_outcome::state::over_limit : hit_outcome::state::ok;
      o.remaining = over ? 0 : static_cast<std::uint32_t>(h.limit - o.count_after);
      o.reset_after = h.reset_after;
      h.req->finish(h.index, std::move(o));
    }
  }

  // ---- the other algorithms ----

  // The limiter of `h`'s algorithm, rate and burst (made on first use), or why there is none.
  std::shared_ptr<redis::limiter> limiter_for(redis::client& c, const hit& h, std::string& error) {
    const effective_limit l = limit_of(h);
    const std::optional<std::uint32_t> burst = h.override_limit ? std::nullopt : h.rule->burst;
    std::string name = signature(h.rule->algorithm, l.requests, l.per, burst);
    const std::lock_guard lock(limiters_mutex);
    if (auto it = limiters.find(name); it != limiters.end()) return it->second;
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
    const seconds window(unit_seconds(l.per));
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
    limiters.emplace(std::move(name), made);
    return made;
  }

  // The limiter's name (the hash tag of its keys): "<prefix><algorithm>:<requests>/<unit>:<burst>".
  std::string signature(algorithm a, std::uint32_t requests, unit per, std::optional<std::uint32_t> burst) const {
    return opts.key_prefix + std::string(to_string(a)) + ":" + std::to_string(requests) + "/" +
           std::string(to_string(per)) + ":" + std::to_string(burst.value_or(requests));
  }

  void decide_on_limiter(redis::client& c, const std::shared_ptr<pending_request>& req, std::size_t i, const hit& h) {
    const effective_limit l = limit_of(h);
    std::string error;
    auto lim = limiter_for(c, h, error);
    if (!lim) return req->fail(i, error);
    lim->async_decide_detailed(
        h.counter_key, h.n,
        [self = shared_from_this(), req, i, lim, n = h.n, limit = l.requests](const redis::limiter_result& r) {
          if (r.error) {
            return req->fail(i, r.message.empty() ? self->failure_text(r.error)
                                                  : "Redis at " + self->address + " answered " + r.message);
          }
          hit_outcome o;
          o.limit = limit;
          const auto used =
              static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.decision.limit - r.decision.remaining));
          o.reset_after = r.decision.reset_after;
          if (r.decision.admitted) {
            o.result = hit_outcome::state::ok;
            o.remaining = static_cast<std::uint32_t>(std::clamp<std::int64_t>(r.decision.remaining, 0, limit));
            o.count_after = used;
          } else {
            o.result = hit_outcome::state::over_limit;
            o.count_after = used + n;
          }
          req->finish(i, std::move(o));
        });
  }

  // ---- concurrency ----

  std::pair<std::string, std::string> lease_keys(std::string_view counter_key) const {
    std::string zset = opts.key_prefix + "cc:{";
    zset.append(counter_key);
    zset.push_back('}');
    std::string counts = zset + ":n";
    return {std::move(zset), std::move(counts)};
  }

  void acquire(redis::client& c, const std::shared_ptr<pending_request>& req, std::size_t i, const hit& h) {
    const std::uint32_t limit = h.rule->concurrency;
    const std::string id = std::string(lease_format) + hex(h.counter_key) + "." + random_id();
    auto [zset, counts] = lease_keys(h.counter_key);
    const redis::script& s = detail::concurrency_script();
    redis::command cmd{"EVALSHA", s.sha1(), "2", zset, counts, "acquire", id};
    cmd.arg(h.n).arg(limit).arg(opts.lease_ttl.count());
    auto on_reply = [self = shared_from_this(), req, i, id, limit, n = h.n](boost::system::error_code ec,
                                                                            const redis::reply& r) {
      if (ec) return req->fail(i, self->failure_text(std::error_code(ec)));
      if (r.is_error()) return req->fail(i, self->reply_text(r));
      if (!r.is_array() || r.elements().size() != 2 || !r.elements()[0].is_integer() || !r.elements()[1].is_integer()) {
        return req->fail(i, "Redis at " + self->address + ": unexpected reply to the concurrency script");
      }
      const auto held = static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.elements()[1].integer()));
      hit_outcome o;
      o.limit = limit;
      if (r.elements()[0].integer() == 1) {
        o.result = hit_outcome::state::ok;
        o.count_after = held;
        o.remaining = held >= limit ? 0 : static_cast<std::uint32_t>(limit - held);
        o.reset_after = self->opts.lease_ttl;
        if (n > 0) o.lease = id;
      } else {
        o.result = hit_outcome::state::over_limit;
        o.count_after = held + n;
      }
      req->finish(i, std::move(o));
    };
    call_script(c, s, std::move(cmd), deadline(), std::move(on_reply));
  }

  // EVALSHA (and on NOSCRIPT: SCRIPT LOAD, EVALSHA again), all by `until`; `handler(error_code, reply)` runs on
  // the client's executor.
  template <class Handler>
  void call_script(redis::client& c, const redis::script& s, redis::command cmd, steady::time_point until,
                   Handler handler) {
    boost::asio::async_compose<Handler, void(boost::system::error_code, redis::reply)>(
        redis::detail::evalsha_op{&c, &s, std::move(cmd), std::optional<steady::time_point>(until)}, handler,
        c.get_executor());
  }
};

redis_backend::redis_backend(boost::asio::any_io_executor executor, redis_backend_options options)
    : state_(std::make_shared<state>(std::move(executor), std::move(options))) {}

redis_backend::~redis_backend() {
  state_->flush();  // what is queued leaves now (and completes: a reply, or closed)
  {
    const std::lock_guard lock(state_->limiters_mutex);
    state_->limiters.clear();
  }
  if (state_->nodes) (void)state_->nodes->close();
  if (state_->conn) (void)state_->conn->close();
}

std::optional<std::string> redis_backend::ping(std::chrono::milliseconds timeout) {
  const auto until = steady::now() + timeout;
  const std::string within = " within " + std::to_string(timeout.count()) + " ms";
  if (state_->conn) {
    if (const std::error_code ec = state_->conn->connect_until(until)) {
      return "Redis at " + state_->address + " did not answer" + within + ": " + ec.message() +
             (ec == make_error_code(errc::timeout) && state_->conn->last_connect_error()
                  ? " (" + state_->conn->last_connect_error().message() + ")"
                  : "");
    }
  }
  // The topology, if not known yet (the same INFO the decisions would ask).
  if (state_->target.load() == nullptr) {
    std::promise<std::string> learned;
    state_->with_client(until, [&learned](redis::client*, const std::string& error) { learned.set_value(error); });
    if (std::string error = learned.get_future().get(); !error.empty()) return error;
  }
  redis::client& c = *state_->target.load();
  const redis::result r = c.execute_command(until, redis::command{"PING"});
  if (r.error) return "Redis at " + state_->address + " did not answer PING" + within + ": " + r.error.message();
  if (r.value.is_error()) return state_->reply_text(r.value);
  return std::nullopt;
}

void redis_backend::decide(std::vector<hit> hits, std::chrono::system_clock::time_point now, completion done) {
  if (hits.empty()) return done({});
  auto req = std::make_shared<pending_request>(hits.size(), std::move(done));
  const steady::time_point until = state_->deadline();
  const std::int64_t unix_now = std::chrono::floor<seconds>(now.time_since_epoch()).count();
  std::vector<window_hit> windows;
  std::vector<std::size_t> others;  // indexes of hits decided by a limiter or a lease
  for (std::size_t i = 0; i < hits.size(); ++i) {
    const hit& h = hits[i];
    if (h.rule == nullptr) {
      req->fail(i, "no rule");
      continue;
    }
    if (h.rule->unlimited) {
      req->finish(i, hit_outcome{});
      continue;
    }
    const effective_limit l = limit_of(h);
    if (h.rule->algorithm == algorithm::fixed_window) {
      const std::int64_t divider = unit_seconds(l.per);
      if (divider <= 0) {
        req->fail(i, h.rule->full_key + ": no unit");
        continue;
      }
      // envoyproxy/ratelimit's window: aligned to Unix time, from this process's clock; its reset: to the window's
      // end, in whole seconds.
      const std::int64_t start = (unix_now / divider) * divider;
      window_hit w;
      w.req = req;
      w.index = i;
      w.key = state_->opts.key_prefix + "fw:{" + h.counter_key + "}:" + std::to_string(divider) + ":" +
              std::to_string(start);
      w.n = h.n;
      w.expire_seconds = divider;
      w.limit = l.requests;
      w.reset_after = seconds(divider - unix_now % divider);
      w.deadline = until;
      windows.push_back(std::move(w));
      continue;
    }
    if (h.rule->algorithm != algorithm::concurrency && l.requests == 0) {
      hit_outcome o;  // a limit of 0 refuses every hit, and answers a query (n = 0)
      o.result = h.n == 0 ? hit_outcome::state::ok : hit_outcome::state::over_limit;
      o.count_after = h.n;
      req->finish(i, std::move(o));
      continue;
    }
    others.push_back(i);
  }
  if (!windows.empty()) state_->submit(std::move(windows));
  if (others.empty()) return;
  state_->with_client(until, [s = state_, req, hits = std::move(hits), others = std::move(others)](
                                 redis::client* c, const std::string& error) {
    for (const std::size_t i : others) {
      if (c == nullptr) {
        req->fail(i, error);
      } else if (hits[i].rule->algorithm == algorithm::concurrency) {
        s->acquire(*c, req, i, hits[i]);
      } else {
        s->decide_on_limiter(*c, req, i, hits[i]);
      }
    }
  });
}

void redis_backend::release(std::string lease, std::function<void(bool)> done) {
  // "cc1.<hex of the counter key>.<random id>"
  std::optional<std::string> counter;
  if (lease.starts_with(lease_format)) {
    const std::string_view rest = std::string_view(lease).substr(lease_format.size());
    if (const auto dot = rest.rfind('.'); dot != std::string_view::npos) counter = unhex(rest.substr(0, dot));
  }
  if (!counter) return done(false);
  auto [zset, counts] = state_->lease_keys(*counter);
  redis::command cmd{"EVALSHA", detail::concurrency_script().sha1(), "2", zset, counts, "release", lease};
  state_->with_client(state_->deadline(), [s = state_, cmd = std::move(cmd), done = std::move(done)](
                                              redis::client* c, const std::string&) mutable {
    if (c == nullptr) return done(false);
    s->call_script(*c, detail::concurrency_script(), std::move(cmd), s->deadline(),
                   [done = std::move(done)](boost::system::error_code ec, const redis::reply& r) {
                     done(!ec && r.is_integer() && r.integer() == 1);
                   });
  });
}

void redis_backend::configure(const configuration& next) {
  std::unordered_set<std::string> used;
  for (const rate_limit_rule& r : next.rules()) {
    used.insert(state_->signature(r.algorithm, r.requests_per_unit, r.per, r.burst));
  }
  const std::lock_guard lock(state_->limiters_mutex);
  std::erase_if(state_->limiters, [&](const auto& entry) { return !used.contains(entry.first); });
}

void redis_backend::check(const configuration& config) {
  for (const rate_limit_rule& r : config.rules()) {
    if (r.unlimited || r.algorithm == algorithm::fixed_window || r.algorithm == algorithm::concurrency) continue;
    if (auto problem = limiter_problem(r.algorithm, r.requests_per_unit, r.per, r.burst)) {
      throw std::invalid_argument(r.file + ":" + std::to_string(r.line) + ": " + r.full_key + ": " + *problem);
    }
  }
}

}  // namespace admit::serve
