// admit::redis::cluster's calls: one call routes its command, sends it, follows MOVED / ASK / TRYAGAIN and completes;
// a broadcast sends one attempt per master and completes once. See cluster.hpp for the behaviour.
//
// Threads. A call has at most one attempt (or one TRYAGAIN timer) outstanding, so its own state needs no lock: each
// step happens-after the previous one through the connection's strand or the timer. A broadcast's attempts each write
// their own result slot; the last one (an acq_rel countdown) reads them all.
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admit/detail/deadline.hpp"
#include "admit/errc.hpp"
#include "cluster_impl.hpp"

namespace admit::redis::detail {

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
          append_command(payload, cmd_);
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
    auto when = admit::detail::deadline_after<clock>(clock::now(), cluster_->options().tryagain_delay);
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

}  // namespace admit::redis::detail
