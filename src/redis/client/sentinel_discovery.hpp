// The connection's side of Redis Sentinel (sentinel.hpp says what users see): asking the sentinels where the master
// is, checking the node's ROLE, the redis+sentinel:// URL and the validation of sentinel_options. Private to the
// library: connection_impl.hpp, connection_lifecycle.cpp and options.cpp use it.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "admit/redis/client/options.hpp"
#include "admit/redis/client/reply.hpp"
#include "admit/redis/client/sentinel.hpp"

namespace admit::redis::detail {

// validate()'s checks of options.sentinel when options.sentinel.master_name is not empty; throws
// std::invalid_argument naming the bad value.
void validate_sentinel(const connection_options& options);

// What one discovery found: the master's address, or why there is none (errc::no_sentinel or errc::unknown_master)
// with what was tried, for connection::last_error().
struct discovered_master {
  std::error_code error;
  std::string host;
  std::uint16_t port = 0;
  std::string words;
};

// One connection's sentinels: asks them in turn (the last one that gave an address first), one discovery at a time,
// and remembers which node they named for check_role's words. Runs on the connection's strand: every member must be
// called there.
class sentinel_discovery : public std::enable_shared_from_this<sentinel_discovery> {
 public:
  sentinel_discovery(boost::asio::any_io_executor strand, const connection_options& options);

  // Starts a discovery; `done` is called once, on the strand, unless cancel() is called first. Each sentinel's
  // exchange (resolve, connect, AUTH, the question) is bounded by the connection's connect_timeout.
  void async_discover(std::function<void(discovered_master)> done);
  // Stops the discovery under way, if any: its `done` is never called, its sockets are closed.
  void cancel();

  // The ROLE reply of the node the last discovery named: empty when it says it is a master, else the words of the
  // failure (errc::not_master).
  std::optional<std::string> check_role(const reply& role) const;

 private:
  boost::asio::any_io_executor strand_;
  sentinel_options options_;
  std::chrono::nanoseconds timeout_;
  std::vector<sentinel_endpoint> order_;  // sentinels in the order they are asked next
  std::uint64_t run_ = 0;                 // bumped by each start and by cancel(): a stale completion does nothing
  // The signal bound to the discovery under way (one per discovery, so that a new one never replaces the cancellation
  // handler of an old one that is still unwinding); the discovery's completion handler shares it.
  std::shared_ptr<boost::asio::cancellation_signal> cancel_;
  std::string named_;  // "host:port, named master 'x' by host:port" of the last discovery
};

}  // namespace admit::redis::detail
