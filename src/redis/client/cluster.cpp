// admit::redis::cluster — construction (its seeds and options checked) and the public class over cluster_impl
// (cluster_impl.hpp: the slot map and the node connections; cluster_call.cpp: the calls). See cluster.hpp for the
// behaviour.
#include "admit/redis/client/cluster.hpp"

#include "admit/detail/deadline.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "admit/detail/host_port.hpp"
#include "cluster_impl.hpp"

namespace admit::redis {
namespace detail {

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
      throw std::invalid_argument("admit::redis::cluster: seed " + admit::detail::host_port(s.host, s.port) +
                                  " has db " + std::to_string(s.db) + " (a cluster has only database 0)");
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

void request_refresh(cluster_impl& impl) { impl.request_refresh(); }
close_result close(cluster_impl& impl, deadline_type deadline, bool wait) { return impl.close(deadline, wait); }
cluster_statistics statistics(const cluster_impl& impl) noexcept { return impl.statistics(); }
std::pair<std::error_code, std::string> last_failure(const cluster_impl& impl) {
  const auto [node, address] = impl.first_failed_node();
  if (!node) return {};
  std::string words = last_error(*node);
  // The node's address first, unless its words name it (a TLS handshake's do).
  if (words.find(address) == std::string::npos) words = address + ": " + words;
  return {last_connect_error(*node), std::move(words)};
}

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
  return admit::detail::optional_deadline_after<clock>(clock::now(), node_options_.close_timeout);
}

void cluster::do_async_execute(std::shared_ptr<detail::request_base> req, const command& cmd) {
  const auto deadline = req->deadline;
  detail::execute(*impl_, std::move(req), deadline, cmd);
}

result cluster::do_execute(std::optional<clock::time_point> deadline, const command& cmd) {
  auto req = std::make_shared<detail::blocking_request>();
  detail::execute(*impl_, req, deadline, cmd);
  auto [ec, value] = req->wait(deadline);
  return result{ec, std::move(value)};
}

}  // namespace admit::redis
