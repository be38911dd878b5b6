// `admit serve`'s Redis backend (see redis_backend.hpp): the client and its topology, and the backend's members.
// The counting itself (fixed windows, limiters, leases) is in redis_counting.cpp.
#include "serve/engine/redis_backend.hpp"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "admit/detail/deadline.hpp"
#include "admit/detail/host_port.hpp"
#include "serve/engine/redis_backend_state.hpp"
#include "serve/engine/redis_scripts.hpp"

namespace admit::serve {

using detail::effective_limit;
using detail::limit_of;
using detail::limiter_problem;
using detail::pending_request;
using detail::steady;
using detail::window_hit;
using std::chrono::seconds;

namespace detail {

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

std::string address_of(const redis::connection_options& o) {
  if (!o.sentinel.master_name.empty()) return "master \"" + o.sentinel.master_name + "\" (Sentinel)";
  if (!o.unix_path.empty()) return o.unix_path;
  return admit::detail::host_port(o.host, o.port);
}

}  // namespace detail

redis_backend::state::state(boost::asio::any_io_executor executor, redis_backend_options o)
    : ex(std::move(executor)), opts(std::move(o)), node_options(redis::parse_url(opts.url)), breaker(opts.breaker) {
  if (opts.key_prefix.find_first_of("{}") != std::string::npos) {
    throw std::invalid_argument("admit serve --redis: the key prefix must not contain '{' or '}', got \"" +
                                opts.key_prefix + "\"");
  }
  if (opts.timeout <= opts.timeout.zero()) throw std::invalid_argument("admit serve --redis: timeout must be > 0");
  if (opts.max_batch < 1) throw std::invalid_argument("admit serve --redis: max_batch must be >= 1");
  // A semaphore's lease_ttl is at most 2^40 µs (about 12.7 days).
  if (opts.lease_ttl <= opts.lease_ttl.zero() ||
      opts.lease_ttl > std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::microseconds(1LL << 40))) {
    throw std::invalid_argument("admit serve --redis: the lease ttl must be > 0 and at most 12 days, got " +
                                std::to_string(opts.lease_ttl.count()) + "ms");
  }
  if (opts.max_limiters < 1) throw std::invalid_argument("admit serve --redis: max_limiters must be >= 1");
  address = detail::address_of(node_options);
  const bool single = !node_options.unix_path.empty() || !node_options.sentinel.master_name.empty();
  if (opts.mode == redis_backend_options::topology::cluster && !single) {
    nodes = std::make_unique<redis::cluster>(ex, std::vector<redis::connection_options>{node_options});
    clustered.store(true);
    target.store(nodes.get());
  } else {
    conn = std::make_unique<redis::connection>(ex, node_options);
    if (opts.mode != redis_backend_options::topology::automatic || single) target.store(conn.get());
  }
}
void redis_backend::state::with_client(steady::time_point deadline, resolved then) {
  redis::client* known = target.load(std::memory_order_acquire);
  if (known == nullptr) {
    const admit::detail::lock_guard lock(topology_mutex);
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

void redis_backend::state::learned_topology(boost::system::error_code ec, const redis::reply& r) {
  std::vector<resolved> ready;
  std::string error;
  redis::client* c = nullptr;
  {
    const admit::detail::lock_guard lock(topology_mutex);
    probing = false;
    ready.swap(waiting);
    if (ec) {
      error = failure_text(std::error_code(ec));
    } else if (r.is_error() && !r.is_error("NOPERM")) {
      error = reply_text(r);  // LOADING, BUSY...: ask again at the next decision
    } else {
      // A server that does not let this user run INFO (NOPERM) is taken as a single server.
      if (!r.is_error() && r.str().find("cluster_enabled:1") != std::string::npos) {
        nodes = std::make_unique<redis::cluster>(ex, std::vector<redis::connection_options>{node_options});
        clustered.store(true, std::memory_order_release);
        target.store(nodes.get(), std::memory_order_release);
      } else {
        target.store(conn.get(), std::memory_order_release);
      }
      c = target.load();
    }
  }
  for (auto& then : ready) then(c, error);
}

std::string redis_backend::state::failure_text(const std::error_code& ec) const {
  // Why the server, or a node of the cluster, is not connected (nodes is set before clustered, and stays): a cluster
  // names only a node that is down now; a connection keeps its last failure after it connected again, which then
  // says nothing of this call (a Redis that stopped answering after an outage read "timed out (connection to redis
  // refused)").
  const bool clustered_now = clustered.load(std::memory_order_acquire);
  const bool down = !clustered_now && !conn->is_connected();
  const std::error_code why =
      clustered_now ? nodes->last_connect_error() : (down ? conn->last_connect_error() : std::error_code{});
  // A call that ran out of time waiting for a connection: the connection's failure is the news (a refused password
  // read "timed out (redis refused the credentials ...)").
  if (why && why != ec && ec == errc::timeout && down) {
    return "Redis at " + address + ": not connected (" + why.message() + "); the call timed out waiting for it";
  }
  std::string s = "Redis at " + address + ": " + ec.message();
  if (why && why != ec) s += " (" + why.message() + ")";
  return s;
}

// An io_context run by a thread of its own. Stopping lets it run out of work first (bounded): the clients' closing
// handlers, and the last completions that let the backend's state go, run before the thread ends.
struct redis_backend::own_io {
  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
  std::promise<void> ran_out;
  std::future<void> done = ran_out.get_future();
  std::thread thread{[this] {
    io.run();
    ran_out.set_value();
  }};
  ~own_io() {
    guard.reset();
    if (done.wait_for(std::chrono::seconds(2)) != std::future_status::ready) io.stop();
    thread.join();
  }
};

redis_backend::redis_backend(boost::asio::any_io_executor executor, redis_backend_options options)
    : state_(std::make_shared<state>(std::move(executor), std::move(options))) {}

redis_backend::redis_backend(redis_backend_options options)
    : io_(std::make_unique<own_io>()), state_(std::make_shared<state>(io_->io.get_executor(), std::move(options))) {}

redis_backend::~redis_backend() {
  state_->flush();  // what is queued leaves now (and completes: a reply, or closed)
  {
    const admit::detail::lock_guard lock(state_->limiters_mutex);
    state_->limiters.clear();
  }
  close_connections(abandoned_.load());  // (abandoned: nothing is left worth waiting for)
  state_.reset();                        // before io_ stops: the last references may be in handlers it runs
}

void redis_backend::abandon() {
  abandoned_.store(true);
  close_connections(true);
}

void redis_backend::close_connections(bool at_once) {
  redis::cluster* nodes = nullptr;
  {
    const admit::detail::lock_guard lock(state_->topology_mutex);
    nodes = state_->nodes.get();
  }
  // Waiting: what was sent is answered first, up to the connections' close_timeout.
  if (nodes != nullptr) (void)(at_once ? nodes->close_for(std::chrono::seconds(0)) : nodes->close());
  if (state_->conn) (void)(at_once ? state_->conn->close_for(std::chrono::seconds(0)) : state_->conn->close());
}

std::optional<std::string> redis_backend::ping(std::chrono::milliseconds timeout) {
  const auto until = admit::detail::deadline_after<steady>(steady::now(), timeout);
  const std::string within = " within " + std::to_string(timeout.count()) + " ms";
  if (state_->conn) {
    if (const std::error_code ec = state_->conn->connect_until(until)) {
      // Why it could not connect, when an attempt said so (refused, wrong password, no TLS there): that, not the
      // timeout that ended the retries, is the news.
      const std::error_code last = state_->conn->last_connect_error();
      if (ec != make_error_code(errc::timeout))
        return "cannot connect to Redis at " + state_->address + ": " + ec.message();
      if (last) return "cannot connect to Redis at " + state_->address + within + ": " + last.message();
      return "Redis at " + state_->address + " did not answer" + within;
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

void redis_backend::decide(std::shared_ptr<pending_decision> call) {
  if (call->hits.empty()) return call->complete();
  auto req = std::make_shared<pending_request>(std::move(call));
  const auto& hits = req->call->hits;
  const std::chrono::system_clock::time_point now = req->call->now;
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
      // Under over_limit_hits: drop the rule's counter holds only the hits it admitted, in keys of its own ("fwd:");
      // an override of the limit is counted as envoyproxy/ratelimit counts it, every hit ("fw:").
      window_hit w;
      w.req = req;
      w.index = i;
      w.drop = over_limit_hits_of(*h.rule) == over_limit_hits::drop && !h.override_limit;
      w.key.reserve(state_->opts.key_prefix.size() + h.counter_key.size() + 48);  // one allocation
      w.key.append(state_->opts.key_prefix).append(w.drop ? "fwd:{" : "fw:{").append(h.counter_key).append("}:");
      w.key.append(std::to_string(divider)).append(":").append(std::to_string(start));
      w.n = h.n;
      w.take = h.n;
      w.expire_seconds = divider;
      w.limit = l.requests;
      w.reset_after = seconds(divider - unix_now % divider);
      w.deadline = until;
      if (h.rule->prefetch > 1 && !h.override_limit) {
        w.window_end_s = start + divider;
        w.prefetch = h.rule->prefetch;
        w.now_s = unix_now;
        state_->take_prefetched(std::move(w), windows);
        continue;
      }
      windows.push_back(std::move(w));
      continue;
    }
    if (h.rule->algorithm != algorithm::concurrency && l.requests == 0) {
      hit_outcome o;  // a limit of 0 refuses every hit, and answers a query (n = 0)
      o.result = h.n == 0 ? hit_outcome::state::ok : hit_outcome::state::over_limit;
      if (h.n > 0) o.reset_after = std::chrono::seconds{unit_seconds(l.per)};  // it never passes: one unit
      o.count_after = h.n;
      req->finish(i, std::move(o));
      continue;
    }
    others.push_back(i);
  }
  if (!windows.empty()) state_->submit(std::move(windows));
  if (others.empty()) return;
  state_->with_client(until, [s = state_, req, others = std::move(others)](redis::client* c, const std::string& error) {
    const auto& mine = req->call->hits;  // kept by req until the last outcome is in
    for (const std::size_t i : others) {
      if (c == nullptr) {
        req->fail(i, error);
      } else if (mine[i].rule->algorithm == algorithm::concurrency) {
        s->acquire(req, i, mine[i]);
      } else {
        s->decide_on_limiter(*c, req, i, mine[i]);
      }
    }
  });
}

void redis_backend::configure(const configuration& next) {
  std::unordered_set<std::string> used;
  for (const rate_limit_rule& r : next.rules()) {
    used.insert(detail::limiter_slot(
        state_->signature(r.algorithm, r.requests_per_unit, r.per, r.burst, detail::charges_refused(r)), r.prefetch));
  }
  {
    const admit::detail::lock_guard lock(state_->limiters_mutex);
    std::erase_if(state_->limiters, [&](const auto& entry) { return !used.contains(entry.first); });
  }
  state_->stock.clear();  // a stock taken under the old limit or prefetch is not spent under the new ones
  // The semaphore objects are made again on use (their state is in Redis); destroyed after the lock.
  std::unordered_map<std::string, std::shared_ptr<redis::semaphore>> dropped;
  const admit::detail::lock_guard lock(state_->semaphores_mutex);
  dropped.swap(state_->semaphores);
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
