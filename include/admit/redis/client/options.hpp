// admit/redis/client/options.hpp — where and how a connection connects: endpoint, credentials, database, TLS, timeouts,
// backoff; and the URL forms that set them.
//
//   auto opts = admit::redis::parse_url("redis://:secret@127.0.0.1:6379/2");   // password "secret", db 2
//   opts.command_timeout = std::chrono::milliseconds(50);
//
// URL forms:
//   redis://[[user]:password@]host[:port][/db]    host is a name, an IPv4 address or [IPv6]; port defaults to 6379
//   rediss://[[user]:password@]host[:port][/db][?tls parameters]   the same over TLS; parameters: ca_file=PATH,
//       cert_file=PATH, key_file=PATH, server_name=NAME, insecure_skip_verify=true|false (the tls_* options below)
//   unix:///absolute/path[?db=N][&user=U][&password=P]   a unix-domain socket
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]
//       [?db=N&sentinel_username=U&sentinel_password=P]
//                                                 through Redis Sentinel (sentinel.hpp): the sentinels (port 26379 by
//                                                 default) and the master's name; user and password are the data
//                                                 node's, sentinel_username and sentinel_password the sentinels'
// user, password and parameter values are percent-decoded ("p%40ss" is "p@ss"; write '?' in a password as %3F).
// parse_url throws std::invalid_argument naming the bad part (an unknown parameter: with the accepted ones) and
// quoting the URL with its password hidden.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "admit/redis/client/sentinel.hpp"

namespace admit::redis {

struct connection_options {
  // TCP endpoint, used when unix_path is empty.
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Unix-domain socket path; when not empty, host and port are ignored.
  std::string unix_path{};
  // AUTH: sent when password is not empty; as "AUTH user password" when user is not empty (Redis 6 ACL).
  std::string user{};
  std::string password{};
  // SELECT: sent when db != 0.
  int db = 0;

  // ---- TLS (rediss:// URLs) ----
  // Connect through TLS (TCP only; OpenSSL). The server's certificate is verified — signed by a CA of tls_ca_file (or
  // of the system's trust store when empty) and issued for the server name — unless tls_insecure_skip_verify.
  bool tls = false;
  std::string tls_ca_file{};    // PEM file of the CA certificates to trust; empty: the system's trust store
  std::string tls_cert_file{};  // PEM client certificate (chain), for servers that require one; with tls_key_file
  std::string tls_key_file{};   // PEM private key of tls_cert_file
  // The name sent as SNI (not for an IP address) and checked against the certificate; empty: host. An IP address is
  // checked against the certificate's IP addresses.
  std::string tls_server_name{};
  // Accepts any certificate from the server: encryption without authentication, open to an impostor in the middle.
  // For tests only.
  bool tls_insecure_skip_verify = false;
  // ---- end of TLS ----

  // Bound on one connection attempt: resolve, connect, TLS handshake, AUTH and SELECT. Must be > 0.
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(1);
  // Default per-call deadline of execute/async_execute (the _for/_until forms override it); nanoseconds::max() means
  // none. Must be > 0.
  std::chrono::nanoseconds command_timeout = std::chrono::seconds(1);
  // Reconnection after a failed attempt or a lost connection: the n-th delay in a row is drawn uniformly from
  // [d/2, d] with d = min(reconnect_max, reconnect_initial * 2^n); a successful connection resets n. 0 < initial <=
  // max.
  std::chrono::nanoseconds reconnect_initial = std::chrono::milliseconds(50);
  std::chrono::nanoseconds reconnect_max = std::chrono::seconds(2);
  // How long close() (and the destructor) keep delivering the calls made before it: writing what is queued and
  // waiting for replies. 0 drops them at once (they complete with errc::closed); nanoseconds::max() waits for every
  // reply. Must be >= 0.
  std::chrono::nanoseconds close_timeout = std::chrono::seconds(1);

  // Redis Sentinel (sentinel.hpp): when sentinel.master_name is not empty, every connection attempt asks these
  // sentinels where the master is (host, port and unix_path are then not used) and checks it with ROLE.
  sentinel_options sentinel{};
};

// Parses a redis://, rediss://, unix:// or redis+sentinel:// URL (see the top of the file) into options with the
// default timeouts. Throws std::invalid_argument naming the bad part: scheme, host, port, database, password, query
// parameter.
connection_options parse_url(std::string_view url);

// `url` as a message or a log may show it: every password replaced by "***" — the user information's (all of it when
// it has no ':', which may be a password alone) and each query parameter's whose name ends in "password" (unix's
// password=, Sentinel's sentinel_password=). The form parse_url's own errors quote it in.
[[nodiscard]] std::string redacted_url(std::string_view url);

// Throws std::invalid_argument naming the bad value if the options cannot work (empty host, non-positive timeouts,
// reconnect_initial > reconnect_max, negative db, a user without a password, TLS settings without tls or over a unix
// socket, a client certificate without its key; with sentinel.master_name: no sentinels, a sentinel with an empty
// host or port 0).
void validate(const connection_options& options);

}  // namespace admit::redis
