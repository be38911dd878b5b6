// admit::redis::cluster — the slot map, the per-node connections, and the state machine of one call (route, send,
// follow MOVED / ASK / TRYAGAIN, complete). See cluster.hpp for the behaviour.
//
// Threads. The slot map, the node list and the refresh state are guarded by cluster_impl::mutex_, held only for
// lookups and updates — never while submitting to a connection, because a connection may complete a request inside
// submit() (deadline passed, closed), which re-enters the cluster. A call has at most one attempt (or one TRYAGAIN
// timer) outstanding, so its own state needs no lock: each step happens-after the previous one through the
// connection's strand or the timer. A broadcast's attempts each write their own result slot; the last one (an
// acq_rel countdown) reads them all.
//
// Lifetime. A call, its attempts and its timer hold the cluster_impl; the cluster_impl holds the node connections,
// whose queues hold attempts. close() breaks that cycle: the connections release their calls when their close ends.
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

namespace admit::redis {
namespace detail {
namespace {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using deadline_type = std::optional<clock::time_point>;

constexpr std::size_t slot_count = 16384;
constexpr std::uint16_t no_node = 0xFFFF;
constexpr std::string_view asking_command = "*1\r\n$6\r\nASKING\r\n";

// "host:port" -> (host, port); false when malformed. The host may be empty (the replying node's own address).
bool split_address(std::string_view address, std::string_view& host, std::uint16_t& port) noexcept {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string_view digits = address.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value == 0 || value > 65535) return false;
  port = static_cast<std::uint16_t>(value);
  return true;
}

// "MOVED 3999 127.0.0.1:6381" -> (3999, "127.0.0.1:6381").
bool parse_redirect(const std::string& text, std::size_t& slot, std::string_view& address) noexcept {
  const std::string_view s = text;
  const auto first = s.find(' ');
  if (first == std::string_view::npos) return false;
  const auto second = s.find(' ', first + 1);
  if (second == std::string_view::npos) return false;
  const std::string_view number = s.substr(first + 1, second - first - 1);
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), slot);
  if (ec != std::errc{} || end != number.data() + number.size() || slot >= slot_count) return false;
  address = s.substr(second + 1);
  return !address.empty();
}

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

}  // namespace

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
    std::lock_guard lock(mutex_);
    for (const auto& s : seeds) add_node_locked(s.host, s.port);
  }

  const asio::any_io_executor& executor() const noexcept { return executor_; }
  const cluster_options& options() const noexcept { return options_; }

  // The owner of `slot` (a seed while unknown); for slot == slot_count, any master. Empty when closed.
  target node_for(std::size_t slot) {
    bool discover = false;
    target t;
    {
      std::lock_guard lock(mutex_);
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
    std::lock_guard lock(mutex_);
    if (closed_) return {};
    const std::string h = host.empty() && replied < nodes_.size() ? nodes_[replied].host : std::string(host);
    const std::size_t index = add_node_locked(h, port);
    return {nodes_[index].conn, index};
  }

  // Every master of the current map; empty when the map is not known (or closed).
  std::vector<target> masters() {
    std::lock_guard lock(mutex_);
    std::vector<target> out;
    if (closed_ || !map_known_) return out;
    for (const std::size_t m : masters_) out.push_back({nodes_[m].conn, m});
    return out;
  }

  std::string host_of(std::size_t index) {
    std::lock_guard lock(mutex_);
    return index < nodes_.size() ? nodes_[index].host : std::string();
  }

  bool is_node_connected(std::size_t index) {
    std::shared_ptr<connection_impl> conn;
    {
      std::lock_guard lock(mutex_);
      if (index >= nodes_.size()) return false;
      conn = nodes_[index].conn;
    }
    return is_connected(*conn);
  }

  // MOVED: `slot` is now served by node `index`.
  void on_moved(std::size_t slot, std::size_t index) {
    moved_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
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
      std::lock_guard lock(mutex_);
      if (closed_) return;
      if (refresh_running_) {
        refresh_again_ = true;
        return;
      }
      if (refresh_timer_armed_) return;
      const auto now = clock::now();
      if (refreshed_once_ && now - last_refresh_start_ < options_.refresh_interval) {
        refresh_timer_armed_ = true;
        refresh_timer_.expires_at(last_refresh_start_ + options_.refresh_interval);
        refresh_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
          {
            std::lock_guard relock(self->mutex_);
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
      std::lock_guard lock(mutex_);
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
    std::lock_guard lock(mutex_);
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
      std::lock_guard lock(mutex_);
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

  std::size_t add_node_locked(const std::string& host, std::uint16_t port) {
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
    auto budget = node_options_.connect_timeout;
    budget += node_options_.command_timeout == std::chrono::nanoseconds::max() ? std::chrono::seconds(1)
                                                                               : node_options_.command_timeout;
    return now + std::chrono::duration_cast<clock::duration>(budget);
  }

  const asio::any_io_executor executor_;
  const connection_options node_options_;
  const cluster_options options_;

  mutable std::mutex mutex_;
  std::vector<node> nodes_;
  std::array<std::uint16_t, slot_count> owner_{};  // index into nodes_, or no_node
  std::vector<std::size_t> masters_;               // the distinct owners of the map
  std::size_t default_node_ = 0;                   // for unknown slots and keyless commands
  bool map_known_ = false;
  bool closed_ = false;
  std::vector<std::shared_ptr<connection_impl>> closing_;  // the node connections, from close() on
  bool refresh_running_ = false;
  bool refresh_again_ = false;  // a refresh was asked for while one was running
  bool refresh_timer_armed_ = false;
  bool refreshed_once_ = false;
  clock::time_point last_refresh_start_{};
  std::size_t refresh_cursor_ = 0;
  asio::steady_timer refresh_timer_;

  std::atomic<std::uint64_t> moved_{0}, ask_{0}, tryagain_{0}, refreshes_{0}, refresh_failures_{0}, nodes_count_{0};
};

namespace {

boost::system::error_code closed_error() { return admit::asio::to_error_code(errc::closed); }

// A broadcast: one attempt per master, then one completion with the first master's reply if all succeeded, else the
// first failure in master order.
class fan_out final : public attempt_sink, public std::enable_shared_from_this<fan_out> {
 public:
  fan_out(std::shared_ptr<request_base> parent, std::size_t n)
      : parent_(std::move(parent)), results_(n), remaining_(n) {}

  void start(const std::vector<cluster_impl::target>& masters, const std::string& payload, deadline_type deadline) {
    for (std::size_t i = 0; i < masters.size(); ++i) {
      auto req = std::make_shared<attempt>(shared_from_this(), i);
      req->payload = payload;
      req->deadline = deadline;
      submit(*masters[i].conn, std::move(req));
    }
  }

  void on_result(std::size_t tag, boost::system::error_code ec, reply&& r) noexcept override {
    results_[tag] = {ec, std::move(r)};
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (auto& [e, value] : results_) {
      if (e || value.is_error()) {
        parent_->try_finish(e, std::move(value));
        return;
      }
    }
    parent_->try_finish({}, std::move(results_.front().second));
  }

 private:
  std::shared_ptr<request_base> parent_;
  std::vector<std::pair<boost::system::error_code, reply>> results_;
  std::atomic<std::size_t> remaining_;
};

// One call: routes, sends, follows redirections, completes `parent_`.
class call final : public attempt_sink, public std::enable_shared_from_this<call> {
 public:
  call(std::shared_ptr<cluster_impl> cluster, std::shared_ptr<request_base> parent, command cmd, route_kind kind,
       std::size_t slot, deadline_type deadline)
      : cluster_(std::move(cluster)),
        parent_(std::move(parent)),
        cmd_(std::move(cmd)),
        kind_(kind),
        slot_(slot),
        deadline_(deadline) {}

  void start(std::string payload) {
    if (kind_ == route_kind::every_master) {
      auto masters = cluster_->masters();
      if (masters.empty()) {  // the map is not known yet: read it first, with this call's deadline
        discovering_ = true;
        const auto t = cluster_->node_for(slot_count);
        if (!t.conn) return finish(closed_error(), reply());
        send(t, format_command(command{"CLUSTER", "SLOTS"}), false);
        return;
      }
      return broadcast(masters, payload);
    }
    const auto t = cluster_->node_for(slot_);
    if (!t.conn) return finish(closed_error(), reply());
    send(t, std::move(payload), false);
  }

  void on_result(std::size_t node, boost::system::error_code ec, reply&& r) noexcept override {
    if (parent_->done()) return;  // timed out or cancelled: no further attempt
    if (ec) {
      if (ec == errc::outcome_unknown || (ec == errc::timeout && !cluster_->is_node_connected(node))) {
        cluster_->request_refresh();
      }
      return finish(ec, reply());
    }
    if (discovering_) {
      discovering_ = false;
      if (r.is_error()) return finish({}, std::move(r));
      if (!cluster_->apply_slots(r, node)) return finish({}, reply::error("ERR unusable CLUSTER SLOTS reply"));
      const auto masters = cluster_->masters();
      if (masters.empty()) return finish(closed_error(), reply());
      return broadcast(masters, format_command(cmd_));
    }
    if (r.is_error()) {
      const std::string_view prefix = r.error_prefix();
      const bool moved = prefix == "MOVED";
      if ((moved || prefix == "ASK") && redirects_ < cluster_->options().max_redirects) {
        std::size_t slot = 0;
        std::string_view address;
        if (parse_redirect(r.str(), slot, address)) {
          const auto t = cluster_->node_at(address, node);
          if (!t.conn) return finish(closed_error(), reply());
          ++redirects_;
          if (moved) {
            cluster_->on_moved(slot, t.index);
          } else {
            cluster_->count_ask();
          }
          std::string payload = moved ? std::string() : std::string(asking_command);
          payload += format_command(cmd_);
          return send(t, std::move(payload), !moved);
        }
      } else if (prefix == "TRYAGAIN" && (deadline_ || redirects_ < cluster_->options().max_redirects)) {
        // A multi-key call whose keys are split by a slot migration in progress: Redis ran nothing, so waiting for the
        // migration is safe; with a deadline, until the deadline (a limiter's batch can stay split for as long as the
        // migration of its keys takes), without one, max_redirects times.
        if (!deadline_) ++redirects_;
        cluster_->count_tryagain();
        return retry_later();
      } else if (prefix == "CLUSTERDOWN") {
        cluster_->request_refresh();
      }
    }
    finish({}, std::move(r));
  }

 private:
  void send(const cluster_impl::target& t, std::string payload, bool asking) {
    if (parent_->done()) return;
    auto req = std::make_shared<attempt>(shared_from_this(), t.index);
    req->payload = std::move(payload);
    req->deadline = deadline_;
    if (asking) req->skip_replies = 1;
    submit(*t.conn, std::move(req));
  }

  void broadcast(const std::vector<cluster_impl::target>& masters, const std::string& payload) {
    if (parent_->done()) return;
    auto f = std::make_shared<fan_out>(parent_, masters.size());
    f->start(masters, payload, deadline_);
  }

  void retry_later() {
    auto when = clock::now() + std::chrono::duration_cast<clock::duration>(cluster_->options().tryagain_delay);
    if (deadline_ && *deadline_ < when) when = *deadline_;
    timer_ = std::make_unique<asio::steady_timer>(cluster_->executor(), when);
    timer_->async_wait([self = shared_from_this()](const boost::system::error_code&) {
      if (self->parent_->done()) return;
      if (self->deadline_ && clock::now() >= *self->deadline_)
        return self->finish(admit::asio::to_error_code(errc::timeout), {});
      const auto t = self->cluster_->node_for(self->slot_);
      if (!t.conn) return self->finish(closed_error(), reply());
      self->send(t, format_command(self->cmd_), false);
    });
  }

  void finish(boost::system::error_code ec, reply&& r) noexcept { parent_->try_finish(ec, std::move(r)); }

  std::shared_ptr<cluster_impl> cluster_;
  std::shared_ptr<request_base> parent_;
  command cmd_;
  route_kind kind_;
  std::size_t slot_;  // slot_count for keyless commands
  deadline_type deadline_;
  std::size_t redirects_ = 0;
  bool discovering_ = false;
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace

std::shared_ptr<cluster_impl> make_cluster_impl(asio::any_io_executor ex, std::vector<connection_options> seeds,
                                                cluster_options options) {
  if (seeds.empty()) throw std::invalid_argument("admit::redis::cluster: no seed node");
  for (const auto& s : seeds) {
    validate(s);
    if (!s.sentinel.master_name.empty()) {
      throw std::invalid_argument("admit::redis::cluster: seed with sentinel master '" + s.sentinel.master_name +
                                  "' (a cluster finds its nodes itself; Sentinel is for one master and its replicas)");
    }
    if (!s.unix_path.empty()) {
      throw std::invalid_argument("admit::redis::cluster: seed '" + s.unix_path +
                                  "' is a unix socket (cluster nodes are host:port)");
    }
    if (s.db != 0) {
      throw std::invalid_argument("admit::redis::cluster: seed " + s.host + ":" + std::to_string(s.port) + " has db " +
                                  std::to_string(s.db) + " (a cluster has only database 0)");
    }
  }
  if (options.refresh_interval < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("admit::redis::cluster: refresh_interval must be >= 0, got " +
                                std::to_string(options.refresh_interval.count()) + "ns");
  }
  if (options.tryagain_delay <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("admit::redis::cluster: tryagain_delay must be > 0, got " +
                                std::to_string(options.tryagain_delay.count()) + "ns");
  }
  return std::make_shared<cluster_impl>(std::move(ex), std::move(seeds), options);
}

void execute(cluster_impl& impl, std::shared_ptr<request_base> req, deadline_type deadline, command cmd) {
  std::string payload = format_command(cmd);  // throws std::invalid_argument for an empty command
  if (deadline && clock::now() >= *deadline) {
    req->try_finish(admit::asio::to_error_code(errc::timeout), reply());
    return;
  }
  const route r = route_of(cmd);
  const std::size_t slot = r.kind == route_kind::keyed ? hash_slot(r.key) : slot_count;
  auto c = std::make_shared<call>(impl.shared_from_this(), std::move(req), std::move(cmd), r.kind, slot, deadline);
  c->start(std::move(payload));
}

void request_refresh(cluster_impl& impl) { impl.request_refresh(); }
close_result close(cluster_impl& impl, deadline_type deadline, bool wait) { return impl.close(deadline, wait); }
cluster_statistics statistics(const cluster_impl& impl) noexcept { return impl.statistics(); }

}  // namespace detail

cluster::cluster(executor_type ex, std::vector<connection_options> seeds, cluster_options options)
    : executor_(std::move(ex)),
      node_options_(seeds.empty() ? connection_options{} : seeds.front()),
      options_(options),
      impl_(detail::make_cluster_impl(executor_, std::move(seeds), options)) {}

cluster::~cluster() {
  detach();
  (void)detail::close(*impl_, close_deadline(), !detail::running_in_this_thread(executor_));
}

close_result cluster::close() { return close_until(close_deadline()); }

close_result cluster::close_until(std::optional<clock::time_point> deadline) {
  return detail::close(*impl_, deadline, !detail::running_in_this_thread(executor_));
}

std::optional<cluster::clock::time_point> cluster::close_deadline() const noexcept {
  const auto timeout = node_options_.close_timeout;
  const auto now = clock::now();
  if (timeout >= std::chrono::duration_cast<std::chrono::nanoseconds>(clock::time_point::max() - now)) {
    return std::nullopt;
  }
  return now + std::chrono::duration_cast<clock::duration>(timeout);
}

void cluster::do_async_execute(std::shared_ptr<detail::request_base> req, command cmd) {
  const auto deadline = req->deadline;
  detail::execute(*impl_, std::move(req), deadline, std::move(cmd));
}

result cluster::do_execute(std::optional<clock::time_point> deadline, const command& cmd) {
  auto req = std::make_shared<detail::blocking_request>();
  detail::execute(*impl_, req, deadline, cmd);
  auto [ec, value] = req->wait(deadline);
  return result{ec, std::move(value)};
}

}  // namespace admit::redis
