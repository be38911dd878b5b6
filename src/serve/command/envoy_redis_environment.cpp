#include "serve/command/envoy_redis_environment.hpp"

#include <string_view>
#include <vector>

#include "cli/common/message.hpp"
#include "cli/common/text.hpp"

namespace admit::serve {
namespace {

// `text` percent-encoded but for RFC 3986's unreserved characters: a user, a password or a file name in a URL.
std::string encoded(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> parts;
  for (std::size_t from = 0;;) {
    const auto comma = text.find(',', from);
    parts.emplace_back(text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return parts;
    from = comma + 1;
  }
}

// What Go's strconv.ParseBool accepts, as envoyproxy/ratelimit reads its flags.
bool truth(const std::string& name, std::string_view value) {
  for (std::string_view t : {"1", "t", "T", "true", "TRUE", "True"}) {
    if (value == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "false", "FALSE", "False"}) {
    if (value == f) return false;
  }
  throw cli::usage_error("invalid " + name + " " + cli::quote(value) + ": expected true or false (or 1/0, t/f)");
}

}  // namespace

std::optional<std::string> redis_url_from_envoy_environment(const std::function<const char*(const char*)>& getenv) {
  const auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  if (const auto backend = get("BACKEND_TYPE"); backend && cli::ascii_lower(*backend) != "redis") {
    throw cli::usage_error("BACKEND_TYPE " + cli::quote(*backend) +
                           " is not offered: admit serve counts in this process (no --redis) or in Redis (--redis URL, "
                           "or REDIS_URL)");
  }
  const auto url = get("REDIS_URL");
  if (!url) {
    // envoyproxy/ratelimit counts in Redis whatever is set, at its default REDIS_URL when none is: an environment that
    // names Redis without saying where would count in this process instead, and multiply every limit by the
    // instances. Said, not guessed: the default socket is a twemproxy's, rarely there.
    for (const char* name : {"BACKEND_TYPE", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_AUTH", "REDIS_TLS"}) {
      if (get(name)) {
        throw cli::usage_error(std::string(name) +
                               " is set but REDIS_URL is not (envoyproxy/ratelimit would use "
                               "its default, the socket /var/run/nutcracker/ratelimit.sock): set REDIS_URL or "
                               "ADMIT_SERVE_REDIS to count in Redis, or unset the REDIS_* variables to count in "
                               "this process");
      }
    }
    return std::nullopt;
  }
  const std::string socket = cli::ascii_lower(get("REDIS_SOCKET_TYPE").value_or("unix"));
  const std::string type = cli::ascii_lower(get("REDIS_TYPE").value_or("single"));
  const bool tls = get("REDIS_TLS") && truth("REDIS_TLS", *get("REDIS_TLS"));
  if (socket != "tcp" && socket != "tcp4" && socket != "tcp6" && socket != "unix") {
    throw cli::usage_error("invalid REDIS_SOCKET_TYPE " + cli::quote(*get("REDIS_SOCKET_TYPE")) +
                           ": expected tcp or unix");
  }
  if (type != "single" && type != "cluster" && type != "sentinel") {
    throw cli::usage_error("invalid REDIS_TYPE " + cli::quote(*get("REDIS_TYPE")) +
                           ": expected single, cluster or sentinel");
  }
  if (const auto skip = get("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION");
      tls && skip && truth("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", *skip)) {
    throw cli::usage_error(
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true is not offered: admit checks the certificate's name; give the name "
        "it carries as server_name in ADMIT_SERVE_REDIS (rediss://host:port?server_name=NAME)");
  }
  // REDIS_AUTH: "password", or "user:password" (an ACL user); each percent-encoded.
  std::string user, password;
  const auto auth = get("REDIS_AUTH");
  if (auth) {
    const auto colon = auth->find(':');
    if (colon == std::string::npos) {
      password = encoded(*auth);
    } else {
      user = encoded(auth->substr(0, colon));
      password = encoded(auth->substr(colon + 1));
    }
  }
  if (socket == "unix") {
    if (url->front() != '/') {
      throw cli::usage_error(
          "REDIS_URL " + cli::quote(*url) + " is not a socket's absolute path, and REDIS_SOCKET_TYPE is " +
          (get("REDIS_SOCKET_TYPE") ? "unix" : "unix (its default)") + ": for host:port, set REDIS_SOCKET_TYPE=tcp");
    }
    if (tls) throw cli::usage_error("REDIS_TLS with REDIS_SOCKET_TYPE unix is not offered: TLS is for tcp");
    if (type != "single") {
      throw cli::usage_error("REDIS_TYPE " + type + " with REDIS_SOCKET_TYPE unix is not offered: use tcp");
    }
    if (!auth) return "unix://" + *url;
    return "unix://" + *url + (user.empty() ? "?" : "?user=" + user + "&") + "password=" + password;
  }
  const std::string at = auth ? user + ":" + password + "@" : "";
  if (type == "sentinel") {
    if (tls) throw cli::usage_error("REDIS_TLS with REDIS_TYPE sentinel is not offered: TLS goes to a master directly");
    const auto parts = split_commas(*url);
    if (parts.size() < 2 || parts[0].empty()) {
      throw cli::usage_error("invalid REDIS_URL " + cli::quote(*url) +
                             " with REDIS_TYPE sentinel: expected the master's name, then the sentinels "
                             "(mymaster,host:port,...)");
    }
    std::string sentinels;
    for (std::size_t i = 1; i < parts.size(); ++i) sentinels += (i > 1 ? "," : "") + parts[i];
    return "redis+sentinel://" + at + sentinels + "/" + parts[0];
  }
  // single, or cluster: a cluster's first node is the seed (the client finds the others from CLUSTER SLOTS).
  const std::string node = type == "cluster" ? split_commas(*url).front() : *url;
  std::string out = (tls ? "rediss://" : "redis://") + at + node;
  if (tls) {
    std::string query;
    for (const auto& [variable, parameter] :
         {std::pair{"REDIS_TLS_CACERT", "ca_file"}, std::pair{"REDIS_TLS_CLIENT_CERT", "cert_file"},
          std::pair{"REDIS_TLS_CLIENT_KEY", "key_file"}}) {
      if (const auto file = get(variable))
        query += (query.empty() ? "?" : "&") + std::string(parameter) + "=" + encoded(*file);
    }
    out += query;
  }
  return out;
}

}  // namespace admit::serve
