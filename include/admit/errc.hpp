// admit/errc.hpp — why an operation of admit failed, as a std::error_code: one vocabulary for the whole library
// (local semaphores and concurrency limiters, the Redis client, the distributed limiters, the distributed
// semaphore's waits).
//
// Expected failures are values, not exceptions: each `acquire`-style call returns a result whose error is an
// `admit::errc`, a Redis call's result carries one in a std::error_code, and `std::error_code{admit::errc::timeout}`
// compares and prints like any other error code. Asynchronous operations complete with a boost::system::error_code
// (Asio's type) that compares equal to the same values; a cancelled one with Asio's operation_aborted.
//
//   std::error_code ec = admit::errc::queue_full;   // ec.message() == "queue full: too many waiters"
#pragma once

#include <string>
#include <system_error>

namespace admit {

enum class errc {
  // 0 is "no error", as for every std::error_code.

  // Any wait, local or distributed.
  queue_full = 1,        // max_waiters were already waiting: rejected at once, without waiting
  timeout = 2,           // the deadline passed first: of a wait for permits, or of a Redis call (if the command was
                         // sent, its late reply is discarded)
  cancelled = 3,         // the caller's stop_token (or the operation's cancellation) ended the wait
  closed = 4,            // the semaphore, or the Redis connection, was closed by its owner (close() or its
                         // destructor) before the request was granted or answered
  exceeds_capacity = 5,  // more permits than the semaphore holds in total: it could never grant them

  // A Redis call: no reply was received. (A Redis error *reply* is a value: admit::redis::reply::is_error().)
  outcome_unknown = 6,      // the connection was lost after the command was (possibly) written: it may have run or not
  connect_timeout = 7,      // connecting (resolve, connect, TLS handshake, AUTH, SELECT) took longer than the connect
                            // timeout
  auth_failed = 8,          // the server answered AUTH with an error (wrong password, unknown user); through Sentinel,
                            // also: every sentinel refused the credentials
  select_failed = 9,        // the server answered SELECT with an error (database index out of range)
  protocol_error = 10,      // the server sent bytes that are not RESP, or a reply nobody asked for: connection dropped
  connection_refused = 11,  // nothing accepts connections at the address (server down or restarting, wrong port or
                            // socket path)
  unknown_host = 12,        // the host name does not exist (the resolver says so: no such name, no address for it)
  connection_failed = 13,   // any other failure to connect (the resolver could not answer now, network
                            // unreachable, connection reset during the handshake, ...)
  connection_lost = 14,     // an established connection was closed or reset (by the server or the network)
  tls_handshake_failed = 15,  // the TLS handshake failed: the server is not TLS, refused the session (e.g. it
                              // requires a client certificate and got none or one it does not trust), no common
                              // protocol version or cipher
  tls_verify_failed = 16,     // the server's certificate was not accepted: not signed by a trusted CA (tls_ca_file),
                              // expired, or not issued for the server name (host or tls_server_name)
  // Redis Sentinel: why a connection attempt found no master to connect to.
  no_sentinel = 17,     // not every sentinel answered: some refused the connection or timed out (waiting may help)
  unknown_master = 18,  // every sentinel answered, and none named the master (none knows the name, or each answered
                        // the question with an error: a node that is no sentinel)
  not_master = 19,      // the node the sentinels named does not say it is a master (ROLE): a failover under way

  // A distributed limiter's decision not made by Redis although the I/O succeeded (or was not attempted).
  error_reply = 20,       // Redis answered with an error (WRONGTYPE, OOM, READONLY, NOPERM, ...)
  unexpected_reply = 21,  // the reply does not have the shape admit's scripts return
  circuit_open = 22,      // the circuit breaker is open: Redis was not called

  // The distributed semaphore.
  would_block = 23,  // try_acquire: the permits are not free now (or others wait first); it never waits
  not_found = 24,    // inspect: no semaphore of that name exists in Redis
  // admit::redis::admission: the limit exists in Redis with another definition (rate, burst, max_in_flight); its
  // inspect() shows the stored one, set_limits() changes it for every process
  definition_conflict = 25,
};

namespace detail {
class errc_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "admit"; }
  // The portable condition of the codes that have one, so that generic code can test `ec == std::errc::timed_out`
  // (or operation_canceled, operation_would_block, connection_refused, connection_reset, protocol_error) whatever
  // produced the error: admit, the operating system or Asio.
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<errc>(value)) {
      case errc::timeout:
      case errc::connect_timeout:
        return std::errc::timed_out;
      case errc::cancelled:
        return std::errc::operation_canceled;
      case errc::would_block:
        return std::errc::operation_would_block;
      case errc::connection_refused:
        return std::errc::connection_refused;
      case errc::connection_lost:
        return std::errc::connection_reset;
      case errc::protocol_error:
        return std::errc::protocol_error;
      default:
        return {value, *this};
    }
  }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::queue_full:
        return "queue full: too many waiters";
      case errc::timeout:
        return "timed out";
      case errc::cancelled:
        return "operation cancelled";
      case errc::closed:
        return "closed";
      case errc::exceeds_capacity:
        return "request exceeds the limit's capacity (its permits, or its rate's burst): it cannot be admitted unless "
               "the capacity grows";
      case errc::outcome_unknown:
        return "connection to redis lost after the command was sent: its outcome is unknown";
      case errc::connect_timeout:
        return "timed out connecting to redis";
      case errc::auth_failed:
        return "redis refused the credentials (AUTH failed)";
      case errc::select_failed:
        return "redis refused to select the database (SELECT failed)";
      case errc::protocol_error:
        return "the server broke the Redis protocol: bytes that are not RESP, or a reply nobody asked for (is it a "
               "Redis server?)";
      case errc::connection_refused:
        return "connection to redis refused";
      case errc::unknown_host:
        return "redis host name does not resolve";
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
      case errc::error_reply:
        return "redis answered with an error";
      case errc::unexpected_reply:
        return "unexpected reply from redis";
      case errc::circuit_open:
        return "circuit breaker open: redis was not called";
      case errc::would_block:
        return "no permit free now";
      case errc::not_found:
        return "no such semaphore";
      case errc::definition_conflict:
        return "the limit exists in redis with another definition";
    }
    return "unknown admit error " + std::to_string(value);
  }
};
}  // namespace detail

// The category of admit::errc. One object for the whole program (an inline variable's address is unique).
inline const std::error_category& error_category() noexcept {
  static const detail::errc_category category;
  return category;
}

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace admit

template <>
struct std::is_error_code_enum<admit::errc> : std::true_type {};
