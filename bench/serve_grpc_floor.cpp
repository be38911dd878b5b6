// admit_serve_grpc_floor — the least a ShouldRateLimit call over gRPC costs on this machine: a server built as
// `admit serve` builds its gRPC server (gRPC's callback API, the raw method, the standard health service, admit serve's
// default limits and resource quota), whose handler decides nothing. It neither parses the request nor builds a
// response: every call is answered with the same bytes, serialized once at start — overall OK and `--statuses`
// statuses OK, each with the limit of bench/serve_config's rule (1,000,000,000 a second), which admit_serve_load
// accepts as a decision.
//
//   admit_serve_grpc_floor [--host 127.0.0.1] [--port 0] [--statuses 1]
//   admit_serve_grpc_floor --redis redis://127.0.0.1:6379 [--redis-keys 100000] [--redis-key-prefix floor:]
//                          [--redis-key-suffix TEXT]
//
// With --redis, the floor of a call that goes to Redis: each call also sends envoyproxy/ratelimit's commands for one
// counter — INCRBY and EXPIRE ... NX of "<prefix><i><suffix>" (i counting calls modulo --redis-keys; by default
// "floor:<i>"; bench/serve_compare.sh gives keys as long as admit serve's), pipelined on one
// admit::redis::connection run by a thread of its own, as `admit serve --redis` runs its client — and is answered when
// their replies are in (UNAVAILABLE if Redis failed). Concurrent calls share the connection's writes; nothing else is
// batched, decided or parsed.
//
// Once listening it writes one line to stderr, in `admit serve`'s log format (bench/serve_compare.sh waits for it):
//   {"msg":"listening","grpc_port":PORT}
// and serves until SIGTERM or SIGINT. bench/serve_compare.sh runs it next to `admit serve` in the same rounds: what
// `admit serve` adds over these numbers is its decision, the protobuf conversions both ways and the request's checks.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admit/detail/host_port.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/pipeline.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace rls = envoy::service::ratelimit::v3;

class floor_handler final
    : public rls::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<rls::RateLimitService::Service> {
 public:
  // `redis`: the connection each call's commands go to, or none; a counter's key is prefix, its number, suffix.
  floor_handler(const rls::RateLimitResponse& answer, admit::redis::connection* redis, std::uint64_t keys,
                std::string key_prefix, std::string key_suffix)
      : redis_(redis), keys_(keys), key_prefix_(std::move(key_prefix)), key_suffix_(std::move(key_suffix)) {
    bool own = false;
    if (!grpc::SerializationTraits<rls::RateLimitResponse>::Serialize(answer, &answer_, &own).ok()) {
      throw std::runtime_error("cannot serialize the fixed answer");
    }
  }

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* /*request*/,
                                            grpc::ByteBuffer* response) override {
    *response = answer_;  // shares the slices: no copy of the bytes
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (redis_ == nullptr) {
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
    const std::string key =
        key_prefix_ + std::to_string(next_.fetch_add(1, std::memory_order_relaxed) % keys_) + key_suffix_;
    admit::redis::pipeline commands;
    commands.add("INCRBY", key, 1).add("EXPIRE", key, 1, "NX");
    redis_->async_execute_pipeline_until(
        admit::redis::connection::clock::now() + std::chrono::seconds(1), std::move(commands),
        [reactor](boost::system::error_code ec, const admit::redis::reply& r) {
          const bool counted = !ec && r.is_array() && r.elements().size() == 2 && r.elements()[0].is_integer();
          reactor->Finish(counted ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNAVAILABLE, "Redis failed"));
        });
    return reactor;
  }

 private:
  grpc::ByteBuffer answer_;
  admit::redis::connection* redis_;
  std::uint64_t keys_;
  std::string key_prefix_, key_suffix_;
  std::atomic<std::uint64_t> next_{0};
};

// An io_context run by a thread of its own (as `admit serve --redis` runs its Redis client).
struct io_thread {
  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~io_thread() {
    guard.reset();
    io.stop();
    thread.join();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A ShouldRateLimit gRPC server that decides nothing: the floor of a call over gRPC"};
  std::string host = "127.0.0.1";
  int port = 0;
  int statuses = 1;
  app.add_option("--host", host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--statuses", statuses, "statuses in every answer (the descriptors per call of the load)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  std::string redis_url;
  std::uint64_t redis_keys = 100'000;
  app.add_option("--redis", redis_url, "send INCRBY + EXPIRE NX of a counter to this Redis per call");
  app.add_option("--redis-keys", redis_keys, "counters the calls rotate over (1: one hot counter)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->capture_default_str();
  std::string key_prefix = "floor:", key_suffix;
  app.add_option("--redis-key-prefix", key_prefix, "a counter's key: this, its number, --redis-key-suffix")
      ->capture_default_str();
  app.add_option("--redis-key-suffix", key_suffix, "see --redis-key-prefix");
  CLI11_PARSE(app, argc, argv);

  // SIGTERM and SIGINT are taken by sigwait below (blocked before gRPC starts its threads, which inherit the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  rls::RateLimitResponse answer;
  answer.set_overall_code(rls::RateLimitResponse::OK);
  for (int i = 0; i < statuses; ++i) {
    auto* s = answer.add_statuses();
    s->set_code(rls::RateLimitResponse::OK);
    s->mutable_current_limit()->set_requests_per_unit(1'000'000'000);
    s->mutable_current_limit()->set_unit(rls::RateLimitResponse::RateLimit::SECOND);
    s->set_limit_remaining(999'999'999);
  }
  std::optional<io_thread> io;
  std::optional<admit::redis::connection> redis;
  if (!redis_url.empty()) {
    io.emplace();
    redis.emplace(io->io.get_executor(), redis_url);
    if (const std::error_code ec = redis.value().connect()) {
      std::cerr << "admit_serve_grpc_floor: cannot connect to " << redis_url << ": " << ec.message() << "\n";
      return EXIT_FAILURE;
    }
  }
  floor_handler handler(answer, redis ? &*redis : nullptr, redis_keys, key_prefix, key_suffix);

  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as admit serve (rls_server.cpp says why)
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  const std::string address = admit::detail::host_port(host, static_cast<unsigned>(port));
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  // admit serve's defaults (rls_server_options): the same limits, the same memory accounting.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(4 * 1024 * 1024);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1024);
  grpc::ResourceQuota quota("admit-serve-floor");
  quota.Resize(std::size_t{1} << 30);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&handler);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0) {
    std::cerr << "admit_serve_grpc_floor: cannot listen on " << address << "\n";
    return EXIT_FAILURE;
  }
  std::cerr << "{\"msg\":\"listening\",\"grpc_port\":" << bound << "}" << std::endl;

  int received = 0;
  sigwait(&stop_signals, &received);
  server->Shutdown();
  server->Wait();
  if (redis) redis->close();
  return EXIT_SUCCESS;
}
