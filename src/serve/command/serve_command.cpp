#include "serve/command/serve_command.hpp"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <tuple>

#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "serve/command/backends.hpp"
#include "serve/command/config_watch.hpp"
#include "serve/command/envoy_redis_environment.hpp"
#include "serve/command/log.hpp"
#include "serve/engine/service.hpp"
#include "serve/grpc/rls_server.hpp"
#include "serve/http/http_server.hpp"

namespace admit::serve {
namespace {

// The first of the environment variables `names` that is set (and not empty), with the name it came from.
struct from_env {
  std::string value;
  std::string name;
};
std::optional<from_env> env(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n); v != nullptr && *v != '\0') return from_env{v, n};
  }
  return std::nullopt;
}

// Fills what the command line left out from the environment; `source` records where each value came from, for
// messages ("--grpc-port" or "GRPC_PORT").
struct sources {
  std::string config = "--config", grpc_port = "--grpc-port", http_port = "--http-port", log_level = "--log-level",
              headers = "--response-headers", drain = "--drain-timeout", shadow = "SHADOW_MODE",
              redis_timeout = "--redis-timeout", lease_ttl = "--lease-ttl", redis = "--redis";
  bool runtime_root_unused = false;  // RUNTIME_ROOT is set, and --config or ADMIT_SERVE_CONFIG said otherwise
};

// What Go's strconv.ParseBool accepts (envoyproxy/ratelimit reads its variables so), and yes/no, on/off.
std::optional<std::string> parse_bool(std::string_view text, bool& out) {
  for (std::string_view t : {"1", "t", "T", "true", "TRUE", "True", "yes", "on"}) {
    if (text == t) {
      out = true;
      return std::nullopt;
    }
  }
  for (std::string_view f : {"0", "f", "F", "false", "FALSE", "False", "no", "off"}) {
    if (text == f) {
      out = false;
      return std::nullopt;
    }
  }
  return "expected true or false (or 1/0, t/f, yes/no, on/off)";
}

void apply_environment(serve_options& o, sources& src) {
  auto take = [](std::optional<std::string>& field, std::string& from, std::initializer_list<const char*> names) {
    if (field) return;
    if (auto e = env(names)) {
      field = e->value;
      from = e->name;
    }
  };
  take(o.config_dir, src.config, {"ADMIT_SERVE_CONFIG"});
  if (o.config_dir) {
    src.runtime_root_unused = env({"RUNTIME_ROOT"}).has_value();
  } else {
    if (auto root = env({"RUNTIME_ROOT"})) {
      std::filesystem::path p(root->value);
      if (auto sub = env({"RUNTIME_SUBDIRECTORY"})) p /= sub->value;
      p /= env({"RUNTIME_APPDIRECTORY"}).value_or(from_env{"config", ""}).value;
      o.config_dir = p.string();
      src.config = "RUNTIME_ROOT";
    }
  }
  take(o.grpc_port, src.grpc_port, {"ADMIT_SERVE_GRPC_PORT", "GRPC_PORT"});
  take(o.http_port, src.http_port, {"ADMIT_SERVE_HTTP_PORT", "PORT"});
  std::string ignored;
  take(o.host, ignored, {"ADMIT_SERVE_HOST", "HOST"});
  take(o.redis, src.redis, {"ADMIT_SERVE_REDIS"});
  if (!o.redis) {  // envoyproxy/ratelimit's variables, as a migrated service's environment file sets them
    o.redis = redis_url_from_envoy_environment([](const char* name) { return std::getenv(name); });
    if (o.redis) src.redis = "REDIS_URL with the other REDIS_* variables";
  }
  take(o.log_level, src.log_level, {"ADMIT_SERVE_LOG_LEVEL", "LOG_LEVEL"});
  take(o.response_headers, src.headers, {"ADMIT_SERVE_RESPONSE_HEADERS"});
  if (!o.response_headers) {
    if (auto e = env({"LIMIT_RESPONSE_HEADERS_ENABLED"})) {
      bool on = false;
      if (auto bad = parse_bool(e->value, on)) {
        throw cli::usage_error("invalid LIMIT_RESPONSE_HEADERS_ENABLED " + cli::quote(e->value) + ": " + *bad);
      }
      if (on) o.response_headers = "ietf";
    }
  }
  take(o.drain_timeout, src.drain, {"ADMIT_SERVE_DRAIN_TIMEOUT"});
  take(o.redis_timeout, src.redis_timeout, {"ADMIT_SERVE_REDIS_TIMEOUT"});
  take(o.lease_ttl, src.lease_ttl, {"ADMIT_SERVE_LEASE_TTL"});
  // A true or false from the environment into `out`, when one of `names` is set: whether one was.
  const auto take_bool = [](bool& out, std::initializer_list<const char*> names) {
    const auto e = env(names);
    if (!e) return false;
    if (auto bad = parse_bool(e->value, out)) {
      throw cli::usage_error("invalid " + e->name + " " + cli::quote(e->value) + ": " + *bad);
    }
    return true;
  };
  // (A flag given on the command line is true: the environment is not read for it.)
  if (!o.reuse_port) take_bool(o.reuse_port, {"ADMIT_SERVE_REUSE_PORT"});
  if (!o.shadow_mode) take_bool(o.shadow_mode, {"ADMIT_SERVE_SHADOW_MODE", "SHADOW_MODE"});
  if (!o.redis_required) take_bool(o.redis_required, {"ADMIT_SERVE_REDIS_REQUIRED"});
  if (bool closed = false; !o.fail_open && take_bool(closed, {"ADMIT_SERVE_FAIL_CLOSED"})) o.fail_open = !closed;
}

// One decision as a debug line: the domain, and each descriptor's entries, code, the limit it was decided against
// (absent: no rule) and what remains.
void log_decision(const rls_request& request, const rls_response& response) {
  nlohmann::json descriptors = nlohmann::json::array();
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : request.descriptors[i].entries) entries.push_back(e.key + "=" + e.value);
    nlohmann::json d{{"entries", std::move(entries)}};
    if (i < response.statuses.size()) {
      const rls_descriptor_status& st = response.statuses[i];
      d["code"] = st.code == rls_code::over_limit ? "OVER_LIMIT" : "OK";
      if (st.current_limit) {
        d["limit"] =
            std::to_string(st.current_limit->requests_per_unit) + "/" + std::string(to_string(st.current_limit->per));
        if (!st.current_limit->name.empty()) d["rule"] = st.current_limit->name;
        d["remaining"] = st.limit_remaining;
      }
    }
    descriptors.push_back(std::move(d));
  }
  log::debug("decision", {{"domain", request.domain},
                          {"code", response.overall_code == rls_code::over_limit ? "OVER_LIMIT" : "OK"},
                          {"descriptors", std::move(descriptors)}});
}

// A whole number of milliseconds, at least 1 ms: what the backends count in.
std::chrono::milliseconds parse_millis(const std::optional<std::string>& text, std::chrono::milliseconds fallback,
                                       const std::string& from, const char* example) {
  if (!text) return fallback;
  const auto d = cli::parse_duration(*text);
  if (!d || *d < std::chrono::milliseconds(1) || *d % std::chrono::milliseconds(1) != std::chrono::nanoseconds(0)) {
    throw cli::usage_error("invalid " + from + " " + cli::quote(*text) +
                           ": expected a whole number of milliseconds, at least 1ms, such as " + example);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

int parse_port(const std::optional<std::string>& text, int fallback, const std::string& from) {
  if (!text) return fallback;
  int port = -1;
  const auto* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, port);
  if (ec != std::errc{} || ptr != end || port < 0 || port > 65535) {
    throw cli::usage_error("invalid " + from + " " + cli::quote(*text) +
                           ": expected a port number from 0 to 65535 (0: any free port)");
  }
  return port;
}

service_options::header_style parse_headers(const std::optional<std::string>& text, const std::string& from) {
  if (!text || *text == "none") return service_options::header_style::none;
  if (*text == "ietf") return service_options::header_style::ietf;
  if (*text == "envoy") return service_options::header_style::envoy;
  throw cli::usage_error("invalid " + from + " " + cli::quote(*text) + ": use none, ietf or envoy");
}

// The address both ports listen on: an IP address as given, or the first address a host name resolves to (so that
// gRPC and HTTP listen on the same one). A name that does not resolve is bad input (exit 2), found before anything
// starts.
std::string listen_address(const std::string& host) {
  if (host.empty()) throw cli::usage_error("invalid --host \"\": give an IP address or a host name, such as 0.0.0.0");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  if (const int e = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); e == EAI_AGAIN || e == EAI_SYSTEM) {
    // The resolver did not answer now: not the name's fault (exit 1, as a port that cannot be bound).
    throw std::runtime_error("cannot resolve --host " + cli::quote(host) + " now: " + ::gai_strerror(e));
  } else if (e != 0 || found == nullptr) {
    throw cli::usage_error("invalid --host " + cli::quote(host) +
                           ": not an IP address, nor a name this machine resolves (" +
                           (e != 0 ? ::gai_strerror(e) : "no address") + ")");
  }
  char text[NI_MAXHOST];
  const int e = ::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(found);
  if (e != 0) throw cli::usage_error("invalid --host " + cli::quote(host) + ": " + ::gai_strerror(e));
  return text;
}

// Blocks the signals admit serve handles, in this thread and every thread started after, and returns a signalfd
// that reads them.
int signal_fd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

// What the configuration holds that means nothing or likely not what was meant, one line each.
void warn_ignored(const configuration& c) {
  for (const config_warning& w : c.warnings()) {
    log::warn("configuration warning", {{"file", w.file}, {"line", w.line}, {"warning", w.message}});
  }
}

void warn_no_rule(const std::filesystem::path& dir) {
  log::warn(
      "no rule in the configuration directory: every request is answered OK until a *.yaml or *.yml file with a rule "
      "is added",
      {{"config", dir.string()}});
}

void reload(service& svc, const backend_choice& chosen, const std::filesystem::path& dir, std::string_view why) {
  try {
    auto next = configuration::load_directory(dir);
    if (chosen.check) chosen.check(*next);
    const std::size_t rules = next->rules().size();
    svc.reload(std::move(next));
    log::info("configuration reloaded", {{"trigger", why}, {"rules", rules}});
    if (rules == 0) warn_no_rule(dir);
    warn_ignored(*svc.current());
  } catch (const config_error& e) {
    svc.record_reload_failure();
    nlohmann::json fields{{"trigger", why}, {"file", e.file()}, {"error", e.message()}};
    if (e.line() > 0) fields["line"] = e.line();  // 0: the refusal is of a whole file or the directory, not a line
    log::error("configuration refused; the previous one stays", fields);
  } catch (const std::exception& e) {
    svc.record_reload_failure();
    log::error("configuration refused; the previous one stays", {{"trigger", why}, {"error", e.what()}});
  }
}

}  // namespace

int run_serve(serve_options o, std::ostream& err) {
  sources src;
  int grpc_port = 0, http_port = 0;
  service_options sopts;
  std::chrono::nanoseconds drain{std::chrono::seconds(10)};
  std::chrono::milliseconds redis_timeout = default_redis_timeout;
  std::chrono::milliseconds lease_ttl = default_lease_ttl;
  std::string listen_host;
  try {
    apply_environment(o, src);
    if (!o.config_dir) throw cli::usage_error("--config DIR is required (or ADMIT_SERVE_CONFIG)");
    grpc_port = parse_port(o.grpc_port, 8081, src.grpc_port);
    http_port = parse_port(o.http_port, 8080, src.http_port);
    if (grpc_port == http_port && grpc_port != 0) {
      // (A port nobody gave is the default's: named so, not as an option the user did not write.)
      const auto named = [](const std::optional<std::string>& given, const std::string& from, const char* fallback) {
        return given ? from : std::string(fallback);
      };
      throw cli::usage_error(named(o.grpc_port, src.grpc_port, "the default gRPC port") + " and " +
                             named(o.http_port, src.http_port, "the default HTTP port") + " are both " +
                             std::to_string(grpc_port) + ": gRPC and HTTP need a port each");
    }
    const auto level = log::parse_level(o.log_level.value_or("info"));
    if (!level) {
      throw cli::usage_error("invalid " + src.log_level + " " + cli::quote(*o.log_level) +
                             ": use debug, info, warn or error (or trace, warning, fatal, panic)");
    }
    log::configure(*level);
    sopts.headers = parse_headers(o.response_headers, src.headers);
    redis_timeout = parse_millis(o.redis_timeout, redis_timeout, src.redis_timeout, "100ms or 1s");
    lease_ttl = parse_millis(o.lease_ttl, lease_ttl, src.lease_ttl, "60s or 5min");
    sopts.shadow_mode = o.shadow_mode;
    sopts.fail_open = o.fail_open.value_or(true);
    listen_host = listen_address(o.host.value_or("0.0.0.0"));
    if (o.drain_timeout) {
      const auto d = cli::parse_duration(*o.drain_timeout);
      if (!d) {
        throw cli::usage_error("invalid " + src.drain + " " + cli::quote(*o.drain_timeout) +
                               ": expected a duration such as 10s or 500ms");
      }
      drain = *d;
    }
  } catch (const cli::usage_error& e) {
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_bad_input;
  } catch (const std::runtime_error& e) {  // (listen_address: a resolver that does not answer)
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_failure;
  }

  const std::filesystem::path dir(*o.config_dir);
  std::shared_ptr<const configuration> initial;
  try {
    initial = configuration::load_directory(dir);
  } catch (const config_error& e) {
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_bad_input;
  }

  const int signals = signal_fd();  // before any thread starts
  if (signals < 0) {
    err << "admit serve: cannot handle signals (signalfd failed)\n";
    return cli::exit_failure;
  }
  std::unique_ptr<config_watch> watch;
  try {
    watch = std::make_unique<config_watch>(dir);
  } catch (const std::exception& e) {
    log::warn("the configuration directory is not watched; reload with SIGHUP", {{"error", e.what()}});
  }

  backend_choice chosen;
  try {
    chosen = make_backend(o.redis, src.redis, o.redis_required, *initial, redis_timeout, lease_ttl);
  } catch (const backend_unavailable& e) {
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_unavailable;
  } catch (const cli::usage_error& e) {
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_bad_input;
  }
  const std::size_t rules = initial->rules().size();
  if (rules == 0) warn_no_rule(dir);
  warn_ignored(*initial);
  // Each decision at debug level: the request's descriptors and what each was decided against.
  if (log::enabled(log::level::debug)) sopts.on_decision = log_decision;
  // The backend's state, logged at error level (so at every --log-level) when it changes, and once a minute while it
  // fails: never once per call.
  sopts.on_backend_event = [backend = chosen.description, open = sopts.fail_open](const backend_event& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(e.failing_for).count();
    const char* policy = open ? "open (OK)" : "closed (OVER_LIMIT)";
    switch (e.what) {
      case backend_event::kind::failing:
        log::error("backend failing: decisions answer by the failure policy",
                   {{"backend", backend}, {"error", e.error}, {"failure_policy", policy}});
        break;
      case backend_event::kind::summary:
        log::error("backend still failing", {{"backend", backend},
                                             {"error", e.error},
                                             {"failing_for_ms", ms},
                                             {"decided_open", e.decided_open},
                                             {"decided_closed", e.decided_closed}});
        break;
      case backend_event::kind::counting:
        log::error("backend counting again", {{"backend", backend},
                                              {"failed_for_ms", ms},
                                              {"decided_open", e.decided_open},
                                              {"decided_closed", e.decided_closed}});
        break;
      case backend_event::kind::failed_meanwhile:  // outages too close to the last line to be told one by one
        log::error("backend failed meanwhile, counting again", {{"backend", backend},
                                                                {"error", e.error},
                                                                {"failed_for_ms", ms},
                                                                {"decided_open", e.decided_open},
                                                                {"decided_closed", e.decided_closed}});
        break;
    }
  };
  service svc(std::move(chosen.store), std::move(initial), sopts);  // chosen.check stays for reloads

  std::unique_ptr<rls_server> grpc;
  std::unique_ptr<http_server> http;
  try {
    rls_server_options g;
    g.host = listen_host;
    g.port = grpc_port;
    g.reuse_port = o.reuse_port;
    grpc = std::make_unique<rls_server>(svc, g);
    http_server_options h;
    h.host = g.host;
    h.port = http_port;
    h.reuse_port = o.reuse_port;
    http = std::make_unique<http_server>(svc, h);
  } catch (const std::exception& e) {  // said once, on stderr, as every other reason not to start
    err << "admit serve: " << e.what() << "\n";
    return cli::exit_failure;
  }
  http->set_serving(true);
  log::write_always(log::level::info, "listening",
                    {{"grpc_port", grpc->port()},
                     {"http_port", http->port()},
                     {"host", o.host.value_or("0.0.0.0")},
                     {"address", listen_host},
                     {"config", dir.string()},
                     {"rules", rules},
                     {"backend", chosen.description},
                     {"failure_policy", sopts.fail_open ? "open" : "closed"},
                     {"shadow_mode", sopts.shadow_mode},
                     {"max_receive_bytes", rls_server_options{}.max_receive_bytes}});
  if (src.runtime_root_unused) {
    // (envoyproxy/ratelimit's variable, which a migrated service may still set: the unit sets ADMIT_SERVE_CONFIG)
    log::warn("RUNTIME_ROOT is set but not used", {{"config", dir.string()}, {"because", src.config + " is given"}});
  }

  // The main thread waits for signals and for changes in the directory.
  for (;;) {
    pollfd fds[2] = {{signals, POLLIN, 0}, {watch ? watch->fd() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, 1000);  // at least once a second: the backend's summaries
    svc.report_backend_health(std::chrono::steady_clock::now());
    if (ready <= 0) continue;  // EINTR, or the second passed
    if ((fds[1].revents & POLLIN) != 0 && watch->drain()) {
      // Let an editor's or a deployment's burst of changes settle, then load once.
      do {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } while (watch->drain());
      reload(svc, chosen, dir, "directory changed");
    }
    if ((fds[0].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      if (info.ssi_signo == SIGHUP) {
        if (watch) watch->rearm();  // the path may name another directory than the one watched
        reload(svc, chosen, dir, "SIGHUP");
        continue;
      }
      break;
    }
  }

  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(drain);
  // Health first, then the line: from the moment "draining" is logged, /healthcheck answers 500.
  grpc->set_serving(false);
  http->set_serving(false);
  log::info("draining", {{"drain_timeout_ms", std::chrono::duration_cast<std::chrono::milliseconds>(drain).count()}});
  // The HTTP port stays open while gRPC drains, so that a load balancer's GET /healthcheck gets 500 rather than a
  // refused connection until the calls in flight are answered; then HTTP drains its own. At the deadline, what still
  // waits for the backend (a Redis that stopped answering) is answered by the failure policy: the transports' calls
  // then end, and the drain with them.
  // A second SIGTERM or SIGINT during the drain (an operator who will not wait, as a second Ctrl-C) does now what the
  // deadline would: what waits for the backend is answered by the failure policy, so the calls waiting on it end.
  // The thread sleeps on the signals and on `wake` (written when it is asked to stop: a drain that ends by itself is
  // not held up).
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  std::jthread abandon([&svc, deadline, signals, wake](const std::stop_token& stop) {
    const std::stop_callback wake_up(stop, [wake] {
      const std::uint64_t one = 1;
      std::ignore = ::write(wake, &one, sizeof one);
    });
    while (!stop.stop_requested()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now());
      if (left.count() <= 0) break;
      pollfd fds[2] = {{signals, POLLIN, 0}, {wake, POLLIN, 0}};
      const int timeout = static_cast<int>(std::min<std::int64_t>(left.count() + 1, wake >= 0 ? 60'000 : 100));
      if (::poll(fds, wake >= 0 ? 2 : 1, timeout) <= 0 || (fds[0].revents & POLLIN) == 0) continue;
      signalfd_siginfo info{};
      if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      if (info.ssi_signo == SIGHUP) continue;  // a reload asked for while draining: nothing to reload into
      log::warn("second signal: what waits for the backend is answered now",
                {{"signal", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM"}});
      break;
    }
    if (!stop.stop_requested()) svc.abandon_waiting();
  });
  grpc->shutdown(deadline);
  http->shutdown(deadline);
  abandon.request_stop();
  abandon.join();
  if (wake >= 0) ::close(wake);
  ::close(signals);
  log::info("stopped");
  return cli::exit_ok;
}

}  // namespace admit::serve
