// `admit serve`'s Redis backend on Redis as it is deployed, reached by the URL `--redis` takes: TLS (rediss://, the CA
// from the URL, a CA that signed nothing the server has), a client certificate the server requires, a Redis Cluster
// that runs TLS (its topology learned over TLS, the reason a node is unreachable in the failure), and a Sentinel
// deployment (redis+sentinel://, the master found by name). Real redis-server processes; the certificates are made by
// the openssl program at run time.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "admit/errc.hpp"
#include "io_thread.hpp"
#include "redis_backend_testing.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"
#include "serve/config/configuration.hpp"
#include "serve/engine/redis_backend.hpp"
#include "tls_certificates.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_cluster;
using admit::redis::testing::redis_sentinel_group;
using admit::redis::testing::redis_server;
using admit::redis::testing::tls_certificates;
using admit::serve::hit;
using admit::serve::hit_outcome;
using admit::serve::rate_limit_rule;
using admit::serve::redis_backend;
using admit::serve::redis_backend_options;
using admit::serve::unit;
using state = hit_outcome::state;
using sys = std::chrono::system_clock;

// A Unix time at the start of a minute: the fixed window's key names it.
constexpr std::int64_t minute_start = 1'700'002'800;
const sys::time_point in_the_minute = sys::time_point(std::chrono::seconds(minute_start + 10));
const std::string window_key = "admit:serve:fw:{domain_key_value_}:60:" + std::to_string(minute_start);

rate_limit_rule three_per_minute() {
  rate_limit_rule r;
  r.full_key = "domain.key_value";
  r.per = unit::minute;
  r.requests_per_unit = 3;
  return r;
}

// One hit of rule `r` on the counter of domain.key_value, in the minute of window_key.
hit_outcome decide_one(redis_backend& b, const rate_limit_rule& r) {
  return admit::serve::testing::decide_one(b, admit::serve::testing::make_hit(r, "domain_key_value_"), in_the_minute);
}

// Five hits on a limit of three: ok, ok, ok, over, over — decided in Redis (the window's counter holds 5).
void expect_decided_in_redis(redis_backend& b, const std::function<std::string()>& counter) {
  const rate_limit_rule r = three_per_minute();
  std::vector<state> seen;
  for (int i = 0; i < 5; ++i) seen.push_back(decide_one(b, r).result);
  EXPECT_EQ(seen, (std::vector<state>{state::ok, state::ok, state::ok, state::over_limit, state::over_limit}));
  EXPECT_EQ(counter(), "5");
}

redis_backend_options options_for(const std::string& url) {
  redis_backend_options o;
  o.url = url;
  o.timeout = 2s;  // generous: a TLS handshake or a Sentinel lookup on a slow CI machine
  return o;
}

redis_server::config tls_config(const tls_certificates& certs, bool require_client_certificate) {
  redis_server::config c;
  c.tls_cert_file = certs.server_cert();
  c.tls_key_file = certs.server_key();
  c.tls_ca_file = certs.ca();
  c.tls_auth_clients = require_client_certificate;
  return c;
}

TEST(RedisServeBackendDeployments, DecidesOverTlsWithTheCaNamedInTheUrl) {
  tls_certificates certs;
  redis_server server(tls_config(certs, false));
  io_thread io;
  redis_backend backend(io.executor(), options_for(server.tls_url("ca_file=" + certs.ca())));
  EXPECT_EQ(backend.ping(5s), std::nullopt);
  expect_decided_in_redis(backend, [&] { return server.admin({"GET", window_key}); });
}

TEST(RedisServeBackendDeployments, PresentsTheClientCertificateFromTheUrlWhenTheServerRequiresOne) {
  tls_certificates certs;
  redis_server server(tls_config(certs, true));
  io_thread io;
  redis_backend backend(io.executor(),
                        options_for(server.tls_url("ca_file=" + certs.ca() + "&cert_file=" + certs.client_cert() +
                                                   "&key_file=" + certs.client_key())));
  EXPECT_EQ(backend.ping(5s), std::nullopt);
  expect_decided_in_redis(backend, [&] { return server.admin({"GET", window_key}); });
}

TEST(RedisServeBackendDeployments, AServerCertificateFromAnotherCaIsRefusedAndNothingIsCounted) {
  tls_certificates certs;
  redis_server server(tls_config(certs, false));
  io_thread io;
  redis_backend backend(io.executor(), options_for(server.tls_url("ca_file=" + certs.other_ca())));
  const auto why = backend.ping(5s);
  ASSERT_TRUE(why.has_value()) << "PING answered through a server certificate no trusted CA signed";
  const hit_outcome o = decide_one(backend, three_per_minute());
  EXPECT_EQ(o.result, state::failed) << "a decision passed without Redis: the failure policy decides it, as failed";
  EXPECT_EQ(server.admin({"EXISTS", window_key}), "0");
}

TEST(RedisServeBackendDeployments, DecidesOnATlsClusterAndSaysWhyANodeIsUnreachable) {
  tls_certificates certs;
  redis_cluster cluster(redis_cluster::tls_files{certs.server_cert(), certs.server_key(), certs.client_cert(),
                                                 certs.client_key(), certs.ca()});
  io_thread io;
  {
    // Learned over TLS (INFO cluster on the seed), then decided on the counter's master.
    redis_backend backend(io.executor(), options_for(cluster.tls_url(0, "ca_file=" + certs.ca())));
    EXPECT_EQ(backend.ping(5s), std::nullopt);
    expect_decided_in_redis(backend, [&] { return cluster.admin(cluster.owner_of(window_key), {"GET", window_key}); });
  }
  // Told it is a cluster, with a CA that signed nothing there: failed, and the failure says why.
  redis_backend_options o = options_for(cluster.tls_url(0, "ca_file=" + certs.other_ca()));
  o.mode = redis_backend_options::topology::cluster;
  redis_backend backend(io.executor(), o);
  const hit_outcome failed = decide_one(backend, three_per_minute());
  EXPECT_EQ(failed.result, state::failed);
  const std::string verify_failed = std::error_code(admit::errc::tls_verify_failed).message();
  EXPECT_NE(failed.error.find(verify_failed), std::string::npos) << failed.error;
}

TEST(RedisServeBackendDeployments, FindsTheMasterThroughSentinelAndDecidesThere) {
  redis_sentinel_group group;
  io_thread io;
  redis_backend backend(io.executor(), options_for(group.url()));
  EXPECT_EQ(backend.ping(5s), std::nullopt);
  expect_decided_in_redis(backend, [&] {
    return redis_sentinel_group::admin(group.master_port(), {"GET", window_key});
  });
}

}  // namespace
