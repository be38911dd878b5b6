// admit/redis/client/sentinel.hpp — Redis Sentinel: the sentinels a connection asks for the address of a named master,
// and how it authenticates to them. A connection with sentinel.master_name set finds its server this way on every
// connection attempt, so it follows a failover by itself.
//
//   auto opts = admit::redis::parse_url("redis+sentinel://10.0.0.1,10.0.0.2,10.0.0.3/cache");   // port 26379
//   admit::redis::connection conn(io.get_executor(), opts);   // asks the sentinels, then connects to the master
//
// Each connection attempt (the first, and every reconnection after a failure or a lost connection):
// 1. asks the sentinels in turn "SENTINEL get-master-addr-by-name <master_name>" (each exchange — connect, AUTH, the
//    question — bounded by connection_options::connect_timeout) and takes the first address given; the sentinel that
//    gave it is asked first next time;
// 2. connects to that address as to any server (AUTH and SELECT with the connection's own user, password and db), then
//    sends ROLE and uses the connection only if the node says it is a master.
// A failed step fails the attempt (errc::no_sentinel, errc::unknown_master, errc::not_master, or the data node's own
// connection errors); the connection then retries with its usual backoff, asking the sentinels again.
//
// Failovers. Sentinel closes the client connections of a master it turns into a replica, and a killed or unreachable
// master loses them anyway: the connection reconnects and step 1 finds the new master. A node that answers a command
// with READONLY (turned into a replica without closing its clients) has its connection dropped too, so that the next
// attempt asks the sentinels again; that command's reply (the READONLY error) is delivered as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace admit::redis {

// The port a sentinel listens on unless told otherwise.
inline constexpr std::uint16_t default_sentinel_port = 26379;

// One sentinel's address: a host name, an IPv4 address or an IPv6 address (without brackets), and a port.
struct sentinel_endpoint {
  std::string host;
  std::uint16_t port = default_sentinel_port;
  friend bool operator==(const sentinel_endpoint&, const sentinel_endpoint&) = default;
};

// Which sentinels to ask, for which master, with which credentials. Part of connection_options (its `sentinel`).
struct sentinel_options {
  // The name the sentinels monitor the master under ("sentinel monitor <name> ..." in their configuration). Empty:
  // Sentinel is not used (connection_options::host and port are). Not empty: host, port and unix_path are not used.
  std::string master_name{};
  // The sentinels, asked in this order at first; not empty when master_name is set. One that answers is enough.
  std::vector<sentinel_endpoint> sentinels{};
  // Sent to each sentinel as AUTH when password is not empty ("AUTH user password" when user is not empty): the
  // sentinels' own requirepass or ACL user, separate from connection_options::user and password, which go to the
  // data node.
  std::string user{};
  std::string password{};
};

}  // namespace admit::redis
