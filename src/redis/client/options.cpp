// URL parsing and validation of admit::redis::connection_options.
#include <algorithm>
#include <charconv>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "admit/redis/client/options.hpp"
#include "admit/redis/client/sentinel.hpp"
#include "sentinel_discovery.hpp"

namespace admit::redis {
namespace {

// What a message may quote of a password.
constexpr std::string_view hidden = "***";
constexpr std::string_view redis_scheme = "redis://";
constexpr std::string_view rediss_scheme = "rediss://";
constexpr std::string_view unix_scheme = "unix://";
constexpr std::string_view sentinel_scheme = "redis+sentinel://";

// `url` with every password in it as "***": the userinfo's (scheme://[user]:password@...) and the value of each query
// parameter whose name ends in "password" (unix's password=, Sentinel's sentinel_password=). Messages quote the URL,
// and they end up in logs.
std::string redacted(std::string_view url) {
  std::string out(url);
  const auto scheme_end = url.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t query = std::min(out.find('?', start), out.size());
  for (auto at = out.find("password=", query); at != std::string::npos; at = out.find("password=", at + 1)) {
    const std::size_t name = out.find_last_of("?&", at);
    if (name == std::string::npos || name < query) continue;
    const std::size_t value = at + 9;
    const std::size_t end = std::min(out.find('&', value), out.size());
    out.replace(value, end - value, hidden);
  }
  if (url.starts_with(unix_scheme)) return out;
  const auto at = out.rfind('@', query == out.size() ? std::string::npos : query);
  if (at == std::string::npos || at < start) return out;
  const auto colon = out.find(':', start);
  if (colon == std::string::npos || colon > at) {
    out.replace(start, at - start, hidden);  // no ':': it may well be a password
  } else if (colon + 1 < at) {
    out.replace(colon + 1, at - colon - 1, hidden);
  }
  return out;
}

[[noreturn]] void bad(std::string_view what, std::string_view part, std::string_view url, std::string_view hint = {}) {
  throw std::invalid_argument("redis URL: " + std::string(what) + " '" + std::string(part) + "' in '" + redacted(url) +
                              "'" + (hint.empty() ? "" : " (" + std::string(hint) + ")"));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `s` with its %XX escapes decoded; `what` names it in a message (never quoted when it is a password).
std::string percent_decode(std::string_view s, std::string_view what, std::string_view url) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      bad("bad percent escape in " + std::string(what), what.ends_with("password") ? hidden : s, url);
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

int parse_db(std::string_view s, std::string_view url) {
  int db = 0;
  if (!parse_int(s, db) || db < 0) bad("bad database number", s, url);
  return db;
}

bool parse_bool(std::string_view name, std::string_view s, std::string_view url) {
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  bad("bad value for " + std::string(name), s, url, "want true, false, 1, 0, yes or no");
}

// Splits "rest?query" at the first '?' (a '?' in a password is written %3F): returns the query, leaves the rest.
std::string_view take_query(std::string_view& rest) {
  const auto q = rest.find('?');
  if (q == std::string_view::npos) return {};
  const std::string_view query = rest.substr(q + 1);
  rest = rest.substr(0, q);
  return query;
}

// "[[user]:password@]" at the front of `authority`, if any, into o.user and o.password; removes it.
void take_userinfo(std::string_view& authority, connection_options& o, std::string_view url) {
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) return;
  const std::string_view userinfo = authority.substr(0, at);
  authority = authority.substr(at + 1);
  const auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) bad("credentials need ':' before the password ([user]:password@)", hidden, url);
  o.user = percent_decode(userinfo.substr(0, colon), "user", url);
  o.password = percent_decode(userinfo.substr(colon + 1), "password", url);
  if (o.password.empty()) bad("empty password", userinfo, url);
}

// "host[:port]" with host a name, an IPv4 address or [IPv6]; the port, when given, is 1-65535.
std::pair<std::string, std::optional<std::uint16_t>> parse_host_port(std::string_view hostport, std::string_view url) {
  std::string_view host = hostport, port;
  if (hostport.starts_with('[')) {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) bad("unterminated IPv6 address", hostport, url);
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad("unexpected text after IPv6 address", after, url);
      port = after.substr(1);
      if (port.empty()) bad("empty port", hostport, url);
    }
  } else if (const auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
    if (port.empty()) bad("empty port", hostport, url);
  }
  if (host.empty()) bad("empty host", hostport, url);
  if (host.find_first_of(" ?#@:") != std::string_view::npos && !hostport.starts_with('[')) bad("bad host", host, url);
  if (port.empty()) return {std::string(host), std::nullopt};
  unsigned value = 0;
  if (!parse_int(port, value) || value == 0 || value > 65535) bad("bad port", port, url);
  return {std::string(host), static_cast<std::uint16_t>(value)};
}

// Calls f(name, value) for each "name=value" of "a=1&b=2".
template <class F>
void for_each_parameter(std::string_view query, std::string_view url, F f) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = param.find('=');
    if (eq == std::string_view::npos) bad("query parameter without a value", param, url);
    f(param.substr(0, eq), param.substr(eq + 1));
  }
}

// The query parameters of each scheme, in the order messages list them.
constexpr std::string_view unix_parameters = "db, user, password";
constexpr std::string_view redis_parameters = "none (TLS parameters need rediss://)";
constexpr std::string_view rediss_parameters = "ca_file, cert_file, key_file, server_name, insecure_skip_verify";
constexpr std::string_view sentinel_parameters = "db, sentinel_username, sentinel_password";

// Applies "name=value&..." to `o`; `tls` and `unix_socket` say which parameters the scheme takes.
void apply_query(connection_options& o, std::string_view query, bool unix_socket, std::string_view url) {
  const std::string_view accepted = unix_socket ? unix_parameters : o.tls ? rediss_parameters : redis_parameters;
  for_each_parameter(query, url, [&](std::string_view name, std::string_view value) {
    if (unix_socket && name == "db") {
      o.db = parse_db(value, url);
    } else if (unix_socket && (name == "password" || name == "user")) {
      (name == "user" ? o.user : o.password) = percent_decode(value, name, url);
    } else if (o.tls && name == "ca_file") {
      o.tls_ca_file = percent_decode(value, name, url);
    } else if (o.tls && name == "cert_file") {
      o.tls_cert_file = percent_decode(value, name, url);
    } else if (o.tls && name == "key_file") {
      o.tls_key_file = percent_decode(value, name, url);
    } else if (o.tls && name == "server_name") {
      o.tls_server_name = percent_decode(value, name, url);
    } else if (o.tls && name == "insecure_skip_verify") {
      o.tls_insecure_skip_verify = parse_bool(name, value, url);
    } else {
      bad("unknown query parameter", name, url, "accepted: " + std::string(accepted));
    }
  });
}

// redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db][?db=N&sentinel_username=U&
// sentinel_password=P]: the userinfo is the data node's, the sentinel_ parameters the sentinels'.
connection_options parse_sentinel_url(std::string_view url) {
  connection_options o;
  std::string_view rest = url.substr(sentinel_scheme.size());
  const std::string_view query = take_query(rest);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  take_userinfo(authority, o, url);
  for (;;) {
    const auto comma = authority.find(',');
    const std::string_view one = authority.substr(0, comma);
    if (one.empty()) bad("empty sentinel address (want host[:port],host[:port]...)", one, url);
    auto [host, port] = parse_host_port(one, url);
    o.sentinel.sentinels.push_back({std::move(host), port.value_or(default_sentinel_port)});
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  const auto db_slash = path.find('/');
  const std::string_view name = path.substr(0, db_slash);
  if (name.empty()) bad("missing master name (want redis+sentinel://host[:port],.../master_name[/db])", path, url);
  o.sentinel.master_name = percent_decode(name, "master name", url);
  std::optional<int> path_db;
  if (db_slash != std::string_view::npos && db_slash + 1 < path.size())
    path_db = parse_db(path.substr(db_slash + 1), url);
  if (path_db) o.db = *path_db;
  for_each_parameter(query, url, [&](std::string_view key, std::string_view value) {
    if (key == "db") {
      const int db = parse_db(value, url);
      if (path_db && *path_db != db) bad("database given twice, differently (path and ?db=)", value, url);
      o.db = db;
    } else if (key == "sentinel_username" || key == "sentinel_password") {
      (key == "sentinel_username" ? o.sentinel.user : o.sentinel.password) = percent_decode(value, key, url);
    } else {
      bad("unknown query parameter", key, url, "accepted: " + std::string(sentinel_parameters));
    }
  });
  return o;
}

}  // namespace

std::string redacted_url(std::string_view url) { return redacted(url); }

connection_options parse_url(std::string_view url) {
  if (url.starts_with(sentinel_scheme)) return parse_sentinel_url(url);
  connection_options o;
  if (url.starts_with(unix_scheme)) {
    std::string_view rest = url.substr(unix_scheme.size());
    const std::string_view query = take_query(rest);
    if (rest.empty() || rest.front() != '/') bad("socket path must be absolute (unix:///path), got", rest, url);
    o.unix_path = std::string(rest);
    apply_query(o, query, true, url);
    return o;
  }
  std::string_view rest;
  if (url.starts_with(redis_scheme)) {
    rest = url.substr(redis_scheme.size());
  } else if (url.starts_with(rediss_scheme)) {
    rest = url.substr(rediss_scheme.size());
    o.tls = true;
  } else {
    const auto colon = url.find("://");
    if (colon == std::string_view::npos) {  // host:port or a socket's path, as other tools write a server's address
      bad("no scheme (want redis://, rediss://, unix:// or redis+sentinel://)", redacted(url), url,
          std::string(url.starts_with('/') ? "for the socket at that path, write unix://"
                                           : "for the server at that address, write redis://") +
              redacted(url));
    }
    bad("unsupported scheme (want redis://, rediss://, unix:// or redis+sentinel://)", url.substr(0, colon), url);
  }
  const std::string_view query = take_query(rest);
  take_userinfo(rest, o, url);
  // host[:port][/db]
  std::string_view hostport = rest;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) o.db = parse_db(db, url);
  }
  auto [host, port] = parse_host_port(hostport, url);
  o.host = std::move(host);
  if (port) o.port = *port;
  apply_query(o, query, false, url);
  return o;
}

void validate(const connection_options& o) {
  if (o.unix_path.empty() && o.host.empty()) throw std::invalid_argument("redis connection_options: empty host");
  if (!o.tls) {
    const std::pair<const char*, bool> tls_only[] = {{"tls_ca_file", !o.tls_ca_file.empty()},
                                                     {"tls_cert_file", !o.tls_cert_file.empty()},
                                                     {"tls_key_file", !o.tls_key_file.empty()},
                                                     {"tls_server_name", !o.tls_server_name.empty()},
                                                     {"tls_insecure_skip_verify", o.tls_insecure_skip_verify}};
    for (const auto& [name, set] : tls_only) {
      if (set) {
        throw std::invalid_argument(std::string("redis connection_options: ") + name +
                                    " is set but tls is false (set tls = true, or use a rediss:// URL)");
      }
    }
  } else {
    if (!o.unix_path.empty()) {
      throw std::invalid_argument("redis connection_options: tls over the unix socket '" + o.unix_path +
                                  "' (TLS is for host:port connections)");
    }
    if (!o.sentinel.master_name.empty()) {
      throw std::invalid_argument(
          "redis connection_options: tls with sentinel.master_name '" + o.sentinel.master_name +
          "' (TLS is not supported through Redis Sentinel: connect to the master by host:port)");
    }
    if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
      throw std::invalid_argument(std::string("redis connection_options: ") +
                                  (o.tls_cert_file.empty() ? "tls_key_file" : "tls_cert_file") + " without " +
                                  (o.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file") +
                                  " (a client certificate needs both)");
    }
  }
  if (!o.user.empty() && o.password.empty()) {
    throw std::invalid_argument("redis connection_options: user '" + o.user +
                                "' without a password (AUTH user password needs both)");
  }
  if (o.db < 0) throw std::invalid_argument("redis connection_options: negative db " + std::to_string(o.db));
  auto positive = [](std::chrono::nanoseconds d, const char* name) {
    if (d <= std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument(std::string("redis connection_options: ") + name + " must be > 0, got " +
                                  std::to_string(d.count()) + "ns");
    }
  };
  positive(o.connect_timeout, "connect_timeout");
  positive(o.command_timeout, "command_timeout");
  positive(o.reconnect_initial, "reconnect_initial");
  positive(o.reconnect_max, "reconnect_max");
  if (o.close_timeout < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("redis connection_options: close_timeout must be >= 0, got " +
                                std::to_string(o.close_timeout.count()) + "ns");
  }
  if (o.reconnect_initial > o.reconnect_max) {
    throw std::invalid_argument("redis connection_options: reconnect_initial (" +
                                std::to_string(o.reconnect_initial.count()) + "ns) > reconnect_max (" +
                                std::to_string(o.reconnect_max.count()) + "ns)");
  }
  detail::validate_sentinel(o);  // sentinel.cpp
}

}  // namespace admit::redis
