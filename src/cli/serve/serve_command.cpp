// `admit serve`'s options (see serve_command.hpp).
#include "cli/serve/serve_command.hpp"

#include <iostream>
#include <memory>

#include "serve/command/serve_command.hpp"

namespace admit::cli {

namespace {

struct serve_state {
  admit::serve::serve_options options;
  bool fail_open = false, fail_closed = false;  // --fail-open, --fail-closed (at most one: they exclude each other)
};

}  // namespace

subcommand add_serve_command(CLI::App& app) {
  auto s = std::make_shared<serve_state>();
  admit::serve::serve_options& so = s->options;
  CLI::App* cmd = app.add_subcommand("serve", admit::serve::serve_description);
  cmd->add_option("--config", so.config_dir, "the directory of YAML configuration files (*.yaml)")->type_name("DIR");
  cmd->add_option("--grpc-port", so.grpc_port, "gRPC port (default 8081; 0: any free port)")->type_name("N");
  cmd->add_option("--http-port", so.http_port, "HTTP port (default 8080; 0: any free port)")->type_name("M");
  cmd->add_option("--host", so.host, "the address both ports listen on (default 0.0.0.0)")->type_name("ADDR");
  cmd->add_option("--redis", so.redis, "count in Redis: redis://..., rediss://..., unix:///path (default: in process)")
      ->type_name("URL");
  cmd->add_flag("--redis-required", so.redis_required, "exit 69 when Redis cannot be reached at start");
  cmd->add_option("--log-level", so.log_level, "debug, info (default), warn or error")->type_name("LEVEL");
  cmd->add_option("--response-headers", so.response_headers,
                  "rate-limit headers in the answer: none (default), ietf (RateLimit-Limit/-Remaining/-Reset) or "
                  "envoy (x-ratelimit-limit/-remaining/-reset)")
      ->type_name("none|ietf|envoy");
  cmd->add_flag("--shadow-mode", so.shadow_mode, "decide and count, but answer OK to every request");
  cmd->add_flag("--reuse-port", so.reuse_port,
                "let other processes listen on the same ports (SO_REUSEPORT): the kernel splits the connections "
                "between them, so with in-process counters each counts only its share and every limit multiplies by "
                "the number of instances (default: a busy port is an error, exit 1)");
  auto* fail_open = cmd->add_flag("--fail-open", s->fail_open, "when the backend fails, answer OK (the default)");
  auto* fail_closed = cmd->add_flag("--fail-closed", s->fail_closed, "when the backend fails, answer OVER_LIMIT");
  fail_open->excludes(fail_closed);
  cmd->add_option("--drain-timeout", so.drain_timeout, "on SIGTERM, how long calls in flight may take (default 10s)")
      ->type_name("DURATION");
  cmd->add_option("--redis-timeout", so.redis_timeout,
                  "how long a decision waits for Redis before the failure policy answers (default 100ms)")
      ->type_name("DURATION");
  cmd->add_option("--lease-ttl", so.lease_ttl,
                  "how long a concurrency lease that is never released holds its permit (default 60s)")
      ->type_name("DURATION");
  return {cmd, [s] {
            if (s->fail_open) s->options.fail_open = true;
            if (s->fail_closed) s->options.fail_open = false;
            return admit::serve::run_serve(std::move(s->options), std::cerr);
          }};
}

}  // namespace admit::cli
