// admit_serve_grpc_floor — the least a ShouldRateLimit call over gRPC costs on this machine: a server built as
// `admit serve` builds its gRPC server (gRPC's callback API, the raw method, the standard health service), whose
// handler decides nothing. It neither parses the request nor builds a response: every call is answered with the
// same bytes, serialized once at start — overall OK and `--statuses` statuses OK, each with the limit of
// bench/serve_config's rule (1,000,000,000 a second), which admit_serve_load accepts as a decision.
//
//   admit_serve_grpc_floor [--host 127.0.0.1] [--port 0] [--statuses 1]
//
// Once listening it writes one line to stderr, in `admit serve`'s log format (bench/serve_compare.sh waits for it):
//   {"msg":"listening","grpc_port":PORT}
// and serves until SIGTERM or SIGINT. bench/serve_compare.sh runs it next to `admit serve` in the same rounds: what
// `admit serve` adds over these numbers is its decision, the protobuf conversions both ways and the request's checks.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace rls = envoy::service::ratelimit::v3;

class floor_handler final
    : public rls::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<rls::RateLimitService::Service> {
 public:
  explicit floor_handler(const rls::RateLimitResponse& answer) {
    bool own = false;
    if (!grpc::SerializationTraits<rls::RateLimitResponse>::Serialize(answer, &answer_, &own).ok()) {
      throw std::runtime_error("cannot serialize the fixed answer");
    }
  }

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* /*request*/,
                                            grpc::ByteBuffer* response) override {
    *response = answer_;  // shares the slices: no copy of the bytes
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  grpc::ByteBuffer answer_;
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
  floor_handler handler(answer);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
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
  return EXIT_SUCCESS;
}
