// The state `admit run --redis` shares (redis_run_state.hpp).
#include "cli/run/redis_run_state.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "admit/redis/client/options.hpp"
#include "cli/common/message.hpp"
#include "cli/common/redis_topology.hpp"
#include "cli/common/run_holder.hpp"

namespace admit::cli::redis_run {

state::state(const run::run_settings& s, const run::entry_info& i, const redis::connection_options& o)
    : settings(s), info(i), conn(io.executor(), o), lost(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (lost < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

state::~state() {
  if (limit) {
    if (abandoned) {
      (void)limit->shutdown(steady::now());
    } else {
      (void)limit->shutdown();
    }
  }
  limit.reset();
  if (nodes) (void)(abandoned ? nodes->close_until(steady::now()) : nodes->close());
  if (abandoned) (void)conn.close_until(steady::now());
  ::close(lost);
}

std::error_code state::make_limits(std::chrono::steady_clock::time_point until) {
  if (limit) return {};
  topology t = learn_topology(
      conn, std::max<std::chrono::nanoseconds>(until - std::chrono::steady_clock::now(), std::chrono::milliseconds(1)));
  if (t.error) return t.error;
  nodes = std::move(t.nodes);
  limit = nodes ? std::make_unique<redis::admission>(*nodes, settings.name, limits(settings), semaphore_options)
                : std::make_unique<redis::admission>(conn, settings.name, limits(settings), semaphore_options);
  return {};
}

admission_options state::limits(const run::run_settings& s) {
  admission_options o;
  o.max_in_flight = s.concurrency;
  if (s.rate) {
    o.rate = *s.rate;
    o.burst = s.burst;
  }
  o.classes = s.classes;
  return o;
}

void state::show(const std::string& id, std::int64_t started_unix_ms) {
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(settings.lease_ttl);
  run_entry e{info, ttl};
  e.info.started_unix_ms = started_unix_ms;
  redis::client& c = limit_client();
  c.async_execute_command(c.default_deadline(),
                          redis::command{"SET", run_holder_key(settings.name, id), to_json(e), "PX",
                                         std::to_string(std::max<std::int64_t>(3 * ttl.count(), 1))},
                          [](boost::system::error_code, redis::reply) {});
}

void state::hide(const std::string& id) {
  redis::client& c = limit_client();
  c.async_execute_command(c.default_deadline(), redis::command{"DEL", run_holder_key(settings.name, id)},
                          [](boost::system::error_code, redis::reply) {});
}

void state::hide_waiters(const std::string& kept) {
  std::vector<std::pair<std::string, std::int64_t>> ids;
  {
    const admit::detail::lock_guard lock(mutex);
    ids.swap(waiter_ids);
  }
  for (const auto& [id, since] : ids) {
    if (id != kept) hide(id);
  }
}

void state::queued_as(const std::string& id) {
  const std::int64_t now = run::unix_time_ms();
  {
    const admit::detail::lock_guard lock(mutex);
    waiter_ids.emplace_back(id, now);
    if (on_queued) on_queued();
  }
  show(id, now);
}

void state::show_waiter() {
  std::optional<std::pair<std::string, std::int64_t>> last;
  {
    const admit::detail::lock_guard lock(mutex);
    if (!waiter_ids.empty()) last = waiter_ids.back();
  }
  if (last) show(last->first, last->second);
}

std::string state::where() const { return redis_address(conn.options()); }

std::string state::holder_where() const {
  return nodes ? "the node of " + where() + "'s cluster that holds " + quote(settings.name) : where();
}

std::string state::unreachable() const {
  if (nodes) {
    const auto [e, text] = nodes->last_failure();
    return e ? "cannot reach " + where() + "'s cluster: " + (text.empty() ? e.message() : text) : std::string();
  }
  if (conn.is_connected()) return {};
  const std::error_code e = conn.last_connect_error();
  return e ? "cannot connect to " + where() + ": " + e.message() : std::string();
}

redis_failure state::failure(std::error_code error, std::string_view reply_text, std::chrono::nanoseconds timeout) {
  std::string said;
  if (error == admit::errc::unexpected_reply && reply_text.empty()) {
    // Asked of the URL's server: on a cluster whose slot has no master, the cluster's own routing has nowhere to send
    // it, and the seed answers what every node does (CLUSTERDOWN). A cluster's redirection (MOVED) is no answer.
    const redis::result r =
        conn.execute_command(steady::now() + call_timeout, {"EXISTS", run_classes_key(settings.name)});
    if (!r.error && r.value.is_error() && (!nodes || r.value.is_transient_error())) {
      said = r.value.str();
      error = admit::errc::error_reply;
      reply_text = said;
    }
  }
  return nodes ? call_failure(conn, *nodes, error, reply_text, timeout)
               : call_failure(conn, error, reply_text, timeout);
}

}  // namespace admit::cli::redis_run
