// admit/redis/client/errc.hpp — why a Redis call failed at the I/O level, as an error code.
//
//   auto r = conn.execute("GET", "k");
//   if (r.error == admit::redis::errc::outcome_unknown) log("the connection dropped: GET may or may not have run");
//
// A Redis error *reply* (NOSCRIPT, MOVED, WRONGTYPE...) is not one of these: it is a value, admit::redis::reply with
// type() == reply_type::error. These codes say that no reply was received. A failed connection attempt is one of
// connection_refused, unknown_host, connection_failed, connect_timeout, tls_handshake_failed, tls_verify_failed,
// auth_failed, select_failed or protocol_error (through Redis Sentinel also no_sentinel, unknown_master or
// not_master), a lost connection connection_lost or protocol_error (connection::last_error() has the system's,
// OpenSSL's or the server's words); only a cancelled call carries Asio's own code (operation_aborted).
#pragma once

#include <boost/system/error_code.hpp>
#include <string>
#include <system_error>

namespace admit::redis {

enum class errc {
  // 0 is "no error".
  timeout = 1,             // the call's deadline passed first; if the command was sent, its late reply is discarded
  outcome_unknown = 2,     // the connection was lost after the command was (possibly) written: it may have run or not
  closed = 3,              // the connection was closed by its owner (close() or its destructor) before a reply came
  connect_timeout = 4,     // connecting (resolve, connect, TLS handshake, AUTH, SELECT) took longer than the connect
                           // timeout
  auth_failed = 5,         // the server answered AUTH with an error (wrong password, unknown user)
  select_failed = 6,       // the server answered SELECT with an error (database index out of range)
  protocol_error = 7,      // the server sent bytes that are not RESP, or a reply nobody asked for: connection dropped
  connection_refused = 8,  // nothing accepts connections at the address (server down or restarting, wrong port or
                           // socket path)
  unknown_host = 9,        // the host name does not exist (the resolver says so: no such name, no address for it)
  connection_failed = 10,  // any other failure to connect (the resolver could not answer now, network unreachable,
                           // connection reset during the handshake, ...)
  connection_lost = 11,    // an established connection was closed or reset (by the server or the network)
  tls_handshake_failed = 12,  // the TLS handshake failed: the server is not TLS, refused the session (e.g. it
                              // requires a client certificate and got none or one it does not trust), no common
                              // protocol version or cipher
  tls_verify_failed = 13,     // the server's certificate was not accepted: not signed by a trusted CA (tls_ca_file),
                              // expired, or not issued for the server name (host or tls_server_name)
  // Redis Sentinel (sentinel.hpp): why a connection attempt found no master to connect to.
  no_sentinel = 14,     // no sentinel answered (each refused, timed out, failed AUTH or answered with an error)
  unknown_master = 15,  // no sentinel that answered knows the master name (and none gave an address)
  not_master = 16,      // the node the sentinels named does not say it is a master (ROLE): a failover under way
};

namespace detail {
class errc_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "admit.redis"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::timeout:
        return "redis call timed out";
      case errc::outcome_unknown:
        return "connection lost after the command was sent: its outcome is unknown";
      case errc::closed:
        return "redis connection closed";
      case errc::connect_timeout:
        return "timed out connecting to redis";
      case errc::auth_failed:
        return "redis AUTH failed";
      case errc::select_failed:
        return "redis SELECT failed";
      case errc::protocol_error:
        return "redis protocol error";
      case errc::connection_refused:
        return "connection to redis refused";
      case errc::unknown_host:
        return "redis host name did not resolve";
      case errc::connection_failed:
        return "could not connect to redis";
      case errc::connection_lost:
        return "connection to redis lost";
      case errc::tls_handshake_failed:
        return "TLS handshake with redis failed";
      case errc::tls_verify_failed:
        return "redis server's TLS certificate not accepted";
      case errc::no_sentinel:
        return "no redis sentinel answered";
      case errc::unknown_master:
        return "no redis sentinel knows the master name";
      case errc::not_master:
        return "the node the redis sentinels named is not a master";
    }
    return "unknown admit.redis error " + std::to_string(value);
  }
};
}  // namespace detail

namespace detail {
// What a failed name resolution (Asio's resolver error `ec`) is: unknown_host when the name does not exist
// (host_not_found: EAI_NONAME, EAI_NODATA; service_not_found), connection_failed for anything else — the resolver
// could not answer now (host_not_found_try_again: EAI_AGAIN, a DNS server down or slow; no_recovery: EAI_FAIL), or a
// local failure. Waiting may fix the second, not the first.
errc resolve_failure(const boost::system::error_code& ec) noexcept;
}  // namespace detail

// The category of admit::redis::errc (one object for the whole program).
inline const std::error_category& error_category() noexcept {
  static const detail::errc_category category;
  return category;
}

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

// As a boost::system::error_code (what Asio completion handlers receive); it compares equal to the errc value.
inline boost::system::error_code to_error_code(errc e) noexcept {
  return boost::system::error_code(make_error_code(e));
}

}  // namespace admit::redis

template <>
struct std::is_error_code_enum<admit::redis::errc> : std::true_type {};
