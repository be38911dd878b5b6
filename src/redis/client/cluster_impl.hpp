// cluster_impl — the engine behind admit::redis::cluster (private to the client's room): the slot map, the node
// connections and their refresh; the attempts (one command sent to one node) through which calls reach the nodes.
// Its calls (routing, redirections, fan-out) are in cluster_call.cpp; construction and the public class in
// cluster.cpp.
//
// Threads. The slot map, the node list and the refresh state are guarded by cluster_impl::mutex_, held only for
// lookups and updates — never while submitting to a connection, because a connection may complete a request inside
// submit() (deadline passed, closed), which re-enters the cluster.
//
// Lifetime. A call, its attempts and its timer hold the cluster_impl; the cluster_impl holds the node connections,
// whose queues hold attempts. close() breaks that cycle: the connections release their calls when their close ends.
#pragma once

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/host_port.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/cluster.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"

namespace admit::redis::detail {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using deadline_type = std::optional<clock::time_point>;

inline constexpr std::size_t slot_count = 16384;
inline constexpr std::uint16_t no_node = 0xFFFF;
inline constexpr std::string_view asking_command = "*1\r\n$6\r\nASKING\r\n";

// "host:port" -> (host, port); false when malformed. The host may be empty (the replying node's own address).
bool split_address(std::string_view address, std::string_view& host, std::uint16_t& port) noexcept;
// "MOVED 3999 127.0.0.1:6381" -> (3999, "127.0.0.1:6381").
bool parse_redirect(const std::string& text, std::size_t& slot, std::string_view& address) noexcept;

// Receives the outcome of an attempt (one command sent to one node).
class attempt_sink {
 public:
  virtual ~attempt_sink() = default;
  virtual void on_result(std::size_t tag, boost::system::error_code ec, reply&& r) noexcept = 0;

 protected:
  attempt_sink() = default;
  attempt_sink(const attempt_sink&) = default;
  attempt_sink& operator=(const attempt_sink&) = default;
};

class attempt final : public request_base {
 public:
  attempt(std::shared_ptr<attempt_sink> sink, std::size_t tag) noexcept : sink_(std::move(sink)), tag_(tag) {}

 private:
  void deliver(boost::system::error_code ec, reply&& r) noexcept override {
    const std::shared_ptr<attempt_sink> sink = std::move(sink_);
    sink->on_result(tag_, ec, std::move(r));
  }

  std::shared_ptr<attempt_sink> sink_;
  std::size_t tag_;
};

class cluster_impl final : public attempt_sink, public std::enable_shared_from_this<cluster_impl> {
 public:
  // A node to send to: its connection and its index in nodes_ (stable: nodes are never removed before close()).
  struct target {
    std::shared_ptr<connection_impl> conn;
    std::size_t index = 0;
  };

  cluster_impl(asio::any_io_executor ex, std::vector<connection_options> seeds, cluster_options options)
      : executor_(std::move(ex)), node_options_(seeds.front()), options_(options), refresh_timer_(executor_) {
    owner_.fill(no_node);
    const admit::detail::lock_guard lock(mutex_);
    for (const auto& s : seeds) add_node_locked(s.host, s.port);
    seed_count_ = nodes_.size();
  }

  const asio::any_io_executor& executor() const noexcept { return executor_; }
  const cluster_options& options() const noexcept { return options_; }

  // The owner of `slot` (a seed while unknown); for slot == slot_count, any master. Empty when closed.
  target node_for(std::size_t slot) {
    bool discover = false;
    target t;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (closed_) return {};
      std::size_t index = slot < slot_count ? owner_[slot] : no_node;
      if (index == no_node) {
        index = default_node_;
        discover = !map_known_ && !refresh_running_ && !refresh_timer_armed_;
      }
      t = {nodes_[index].conn, index};
    }
    if (discover) request_refresh();
    return t;
  }

  // The node at `address` ("host:port"; an empty host is that of node `replied`), connecting to it when new.
  target node_at(std::string_view address, std::size_t replied) {
    std::string_view host;
    std::uint16_t port = 0;
    if (!split_address(address, host, port)) return {};
    const admit::detail::lock_guard lock(mutex_);
    if (closed_) return {};
    const std::string h = host.empty() && replied < nodes_.size() ? nodes_[replied].host : std::string(host);
    const std::size_t index = add_node_locked(h, port);
    return {nodes_[index].conn, index};
  }

  // Every master of the current map; empty when the map is not known (or closed).
  std::vector<target> masters() {
    const admit::detail::lock_guard lock(mutex_);
    std::vector<target> out;
    if (closed_ || !map_known_) return out;
    for (const std::size_t m : masters_) out.push_back({nodes_[m].conn, m});
    return out;
  }

  std::string host_of(std::size_t index) {
    const admit::detail::lock_guard lock(mutex_);
    return index < nodes_.size() ? nodes_[index].host : std::string();
  }

  // The first node that is down after a failure, among the seeds and the masters of the current map (a node that
  // left the map, after a failover or a redirection, is no longer asked): its connection (null if none is) and its
  // address, "host:port". Seeds first, then the masters in the order they became known.
  std::pair<std::shared_ptr<connection_impl>, std::string> first_failed_node() const {
    std::vector<node> nodes;
    {
      const admit::detail::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const bool master = std::find(masters_.begin(), masters_.end(), i) != masters_.end();
        if (i < seed_count_ || master) nodes.push_back(nodes_[i]);
      }
    }
    for (const auto& n : nodes) {
      if (!is_connected(*n.conn) && last_connect_error(*n.conn))
        return {n.conn, admit::detail::host_port(n.host, n.port)};
    }
    return {};
  }

  bool is_node_connected(std::size_t index) {
    std::shared_ptr<connection_impl> conn;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (index >= nodes_.size()) return false;
      conn = nodes_[index].conn;
    }
    return is_connected(*conn);
  }

  // MOVED: `slot` is now served by node `index`.
  void on_moved(std::size_t slot, std::size_t index) {
    moved_.fetch_add(1, std::memory_order_relaxed);
    {
      const admit::detail::lock_guard lock(mutex_);
      if (closed_ || index >= nodes_.size()) return;
      owner_[slot] = static_cast<std::uint16_t>(index);
      if (std::find(masters_.begin(), masters_.end(), index) == masters_.end()) masters_.push_back(index);
    }
    request_refresh();
  }
  void count_ask() noexcept { ask_.fetch_add(1, std::memory_order_relaxed); }
  void count_tryagain() noexcept { tryagain_.fetch_add(1, std::memory_order_relaxed); }

  // A slot-map refresh now, later (rate limit), or after the one in progress (coalesced).
  void request_refresh() {
    target t;
    deadline_type deadline;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (closed_) return;
      if (refresh_running_) {
        refresh_again_ = true;
        return;
      }
      if (refresh_timer_armed_) return;
      const auto now = clock::now();
      if (refreshed_once_ && now - last_refresh_start_ < options_.refresh_interval) {
        refresh_timer_armed_ = true;
        refresh_timer_.expires_at(admit::detail::deadline_after<clock>(last_refresh_start_, options_.refresh_interval));
        refresh_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
          {
            const admit::detail::lock_guard relock(self->mutex_);
            self->refresh_timer_armed_ = false;
          }
          if (!ec) self->request_refresh();
        });
        return;
      }
      refresh_running_ = true;
      refreshed_once_ = true;
      last_refresh_start_ = now;
      const std::size_t index = refresh_cursor_ % nodes_.size();
      t = {nodes_[index].conn, index};
      deadline = refresh_deadline(now);
    }
    auto req = std::make_shared<attempt>(shared_from_this(), t.index);
    req->payload = format_command(command{"CLUSTER", "SLOTS"});
    req->deadline = deadline;
    submit(*t.conn, std::move(req));
  }

  // The answer to a refresh's CLUSTER SLOTS (tag: the node asked).
  void on_result(std::size_t tag, boost::system::error_code ec, reply&& r) noexcept override {
    const bool applied = !ec && apply_slots(r, tag);
    bool again = false;
    {
      const admit::detail::lock_guard lock(mutex_);
      refresh_running_ = false;
      again = std::exchange(refresh_again_, false);
      if (!applied && !nodes_.empty()) {  // ask another node next time; while no map is known, send there too
        ++refresh_cursor_;
        if (!map_known_) default_node_ = refresh_cursor_ % nodes_.size();
      }
    }
    (applied ? refreshes_ : refresh_failures_).fetch_add(1, std::memory_order_relaxed);
    if (again) request_refresh();
  }

  // Replaces the map with a CLUSTER SLOTS reply from node `asked`: [[start, end, [host, port, ...], replicas...]...].
  // False (map unchanged) when the reply is not such a map.
  bool apply_slots(const reply& r, std::size_t asked) {
    struct range {
      std::size_t first, last;
      std::string host;
      std::uint16_t port;
    };
    if (!r.is_array() || r.elements().empty()) return false;
    std::vector<range> ranges;
    for (const reply& e : r.elements()) {
      const auto& f = e.elements();
      if (!e.is_array() || f.size() < 3 || !f[0].is_integer() || !f[1].is_integer() || !f[2].is_array()) return false;
      const auto& master = f[2].elements();
      if (master.size() < 2 || !master[0].is_string() || !master[1].is_integer()) return false;
      const std::int64_t first = f[0].integer(), last = f[1].integer(), port = master[1].integer();
      if (first < 0 || last < first || last >= static_cast<std::int64_t>(slot_count) || port <= 0 || port > 65535) {
        return false;
      }
      ranges.push_back({static_cast<std::size_t>(first), static_cast<std::size_t>(last), master[0].str(),
                        static_cast<std::uint16_t>(port)});
    }
    const admit::detail::lock_guard lock(mutex_);
    if (closed_) return false;
    // "" or "?": the node does not know its own endpoint; it is the address we reached it at.
    const std::string asked_host = asked < nodes_.size() ? nodes_[asked].host : std::string();
    owner_.fill(no_node);
    masters_.clear();
    for (const range& g : ranges) {
      const std::size_t index = add_node_locked(g.host.empty() || g.host == "?" ? asked_host : g.host, g.port);
      std::fill(owner_.begin() + static_cast<std::ptrdiff_t>(g.first),
                owner_.begin() + static_cast<std::ptrdiff_t>(g.last) + 1, static_cast<std::uint16_t>(index));
      if (std::find(masters_.begin(), masters_.end(), index) == masters_.end()) masters_.push_back(index);
    }
    default_node_ = masters_.front();
    map_known_ = true;
    return true;
  }

  // Closes every node connection as connection::close does, with one deadline for all, and sums what they could not
  // deliver. A second call waits for the first one's outcome.
  close_result close(deadline_type deadline, bool wait) {
    std::vector<std::shared_ptr<connection_impl>> closing;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (!closed_) {
        closed_ = true;
        masters_.clear();
        refresh_timer_.cancel();
        // Out of nodes_ (they hold calls that hold this object): a call redirected from now on completes with
        // errc::closed. Kept in closing_ for the waits of later close() calls.
        for (auto& n : std::exchange(nodes_, {})) {
          begin_close(*n.conn, deadline);
          closing_.push_back(std::move(n.conn));
        }
      }
      closing = closing_;
    }
    if (!wait) return close_result{.waited = false};
    close_result total;
    for (auto& conn : closing) {
      const close_result r = await_close(*conn, deadline);
      total.unsent += r.unsent;
      total.unanswered += r.unanswered;
      total.waited = total.waited && r.waited;
    }
    return total;
  }

  cluster_statistics statistics() const noexcept {
    cluster_statistics s;
    s.moved = moved_.load(std::memory_order_relaxed);
    s.ask = ask_.load(std::memory_order_relaxed);
    s.tryagain = tryagain_.load(std::memory_order_relaxed);
    s.refreshes = refreshes_.load(std::memory_order_relaxed);
    s.refresh_failures = refresh_failures_.load(std::memory_order_relaxed);
    s.nodes = nodes_count_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  struct node {
    std::string host;
    std::uint16_t port = 0;
    std::shared_ptr<connection_impl> conn;
  };

  std::size_t add_node_locked(const std::string& host, std::uint16_t port) ADMIT_REQUIRES(mutex_) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].port == port && nodes_[i].host == host) return i;
    }
    if (nodes_.size() >= no_node) throw std::length_error("admit::redis::cluster: too many nodes");
    connection_options o = node_options_;
    o.host = host;
    o.port = port;
    o.unix_path.clear();
    nodes_.push_back({host, port, make_connection_impl(executor_, std::move(o))});
    nodes_count_.store(nodes_.size(), std::memory_order_relaxed);
    return nodes_.size() - 1;
  }

  deadline_type refresh_deadline(clock::time_point now) const {
    // Connecting to the node may be part of it.
    const auto connected = admit::detail::deadline_after<clock>(now, node_options_.connect_timeout);
    return admit::detail::optional_deadline_after<clock>(
        connected, node_options_.command_timeout == std::chrono::nanoseconds::max() ? std::chrono::seconds(1)
                                                                                    : node_options_.command_timeout);
  }

  const asio::any_io_executor executor_;
  const connection_options node_options_;
  std::size_t seed_count_ = 0;  // nodes_[0, seed_count_) are the seeds (set in the constructor)
  const cluster_options options_;

  mutable admit::detail::mutex mutex_;
  std::vector<node> nodes_ ADMIT_GUARDED_BY(mutex_);
  std::array<std::uint16_t, slot_count> owner_ ADMIT_GUARDED_BY(mutex_){};  // index into nodes_, or no_node
  std::vector<std::size_t> masters_ ADMIT_GUARDED_BY(mutex_);               // the distinct owners of the map
  std::size_t default_node_ ADMIT_GUARDED_BY(mutex_) = 0;                   // for unknown slots and keyless commands
  bool map_known_ ADMIT_GUARDED_BY(mutex_) = false;
  bool closed_ ADMIT_GUARDED_BY(mutex_) = false;
  // The node connections, from close() on.
  std::vector<std::shared_ptr<connection_impl>> closing_ ADMIT_GUARDED_BY(mutex_);
  bool refresh_running_ ADMIT_GUARDED_BY(mutex_) = false;
  bool refresh_again_ ADMIT_GUARDED_BY(mutex_) = false;  // a refresh was asked for while one was running
  bool refresh_timer_armed_ ADMIT_GUARDED_BY(mutex_) = false;
  bool refreshed_once_ ADMIT_GUARDED_BY(mutex_) = false;
  clock::time_point last_refresh_start_ ADMIT_GUARDED_BY(mutex_){};
  std::size_t refresh_cursor_ ADMIT_GUARDED_BY(mutex_) = 0;
  asio::steady_timer refresh_timer_;

  std::atomic<std::uint64_t> moved_{0}, ask_{0}, tryagain_{0}, refreshes_{0}, refresh_failures_{0}, nodes_count_{0};
};

}  // namespace admit::redis::detail
