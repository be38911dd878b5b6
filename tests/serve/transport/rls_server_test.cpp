// The gRPC server's drain (serve/grpc/rls_server.hpp): a call in flight when the drain starts is answered; one still
// waiting for its decision at the drain's deadline is cancelled, and shutdown returns once its decision has come.
// The backend holds each decision until the test lets it go, so nothing here depends on timing.
#include "serve/grpc/rls_server.hpp"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "held_backend.hpp"

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace rls_server_test {

using namespace std::chrono_literals;

using testing::held_backend;
using testing::one_rule;

// Keeps the decision's completion, then throws (as a backend that fails after it queued part of a request).
class throws_after_keeping final : public backend {
 public:
  void decide(std::shared_ptr<pending_decision> call) override {
    held_.push_back(std::move(call));
    throw std::runtime_error("the backend broke after keeping the decision");
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}
  void complete_all() {
    for (auto& call : held_) call->complete();
    held_.clear();
  }

 private:
  std::vector<std::shared_ptr<pending_decision>> held_;
};

struct fixture {
  held_backend* store = nullptr;
  std::unique_ptr<service> svc;
  std::unique_ptr<rls_server> server;
  std::shared_ptr<grpc::Channel> channel;

  explicit fixture(std::chrono::milliseconds answer_grace = rls_server_options{}.answer_grace)
      : fixture(std::make_unique<held_backend>(), answer_grace) {}
  explicit fixture(std::unique_ptr<backend> b,
                   std::chrono::milliseconds answer_grace = rls_server_options{}.answer_grace) {
    store = dynamic_cast<held_backend*>(b.get());
    svc = std::make_unique<service>(std::move(b), one_rule(), service_options{});
    rls_server_options opts;
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.answer_grace = answer_grace;
    server = std::make_unique<rls_server>(*svc, opts);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials());
  }

  // Starts one call; the future gets its status and response.
  struct call {
    grpc::ClientContext ctx;
    rls_pb::RateLimitRequest req;
    rls_pb::RateLimitResponse resp;
    std::promise<grpc::Status> status;
  };
  // (A domain without rules is answered without asking the backend.)
  std::unique_ptr<call> start_call(const std::string& domain = "d") {
    auto c = std::make_unique<call>();
    c->req.set_domain(domain);
    auto* e = c->req.add_descriptors()->add_entries();
    e->set_key("k");
    e->set_value("v");
    auto stub = rls_pb::RateLimitService::NewStub(channel);
    stub->async()->ShouldRateLimit(&c->ctx, &c->req, &c->resp,
                                   [p = &c->status](grpc::Status s) { p->set_value(std::move(s)); });
    return c;
  }
};

TEST(RlsServer, AnswersWhileServing) {
  fixture f;
  auto c = f.start_call();
  f.store->wait_held(1);
  f.store->release_all();
  const grpc::Status s = c->status.get_future().get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(c->resp.overall_code(), rls_pb::RateLimitResponse::OK);
  EXPECT_EQ(c->resp.statuses(0).limit_remaining(), 4U);
}

// A decision that throws is answered INTERNAL once; its completion, coming later, does not answer again.
TEST(RlsServer, ABackendThatThrowsAfterKeepingTheDecisionIsAnsweredOnce) {
  auto b = std::make_unique<throws_after_keeping>();
  throws_after_keeping* store = b.get();
  fixture f(std::move(b));
  auto c = f.start_call();
  const grpc::Status s = c->status.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  store->complete_all();  // the late completion: no second Finish
  auto again = f.start_call();
  EXPECT_EQ(again->status.get_future().get().error_code(), grpc::StatusCode::INTERNAL);
  store->complete_all();
  f.server->shutdown(std::chrono::system_clock::now() + 5s);
}

TEST(RlsServer, DrainAnswersTheCallInFlight) {
  fixture f;
  auto c = f.start_call();
  f.store->wait_held(1);
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now() + 1h); });
  // The drain has begun once nobody answers SERVING any more; the held call is still waiting for its decision.
  for (;;) {
    grpc::ClientContext ctx;
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1), response;  // HealthCheckRequest{}: no bytes
    grpc::GenericStub generic(f.channel);
    std::promise<grpc::Status> p;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                      [&p](grpc::Status s) { p.set_value(std::move(s)); });
    const grpc::Status s = p.get_future().get();
    // SERVING is field 1 = 1: the bytes 08 01.
    std::vector<grpc::Slice> slices;
    const bool serving =
        s.ok() && response.Dump(&slices).ok() && !slices.empty() && slices[0].size() == 2 && slices[0].begin()[1] == 1;
    if (!serving) break;
    std::this_thread::yield();
  }
  f.store->release_all();
  const grpc::Status s = c->status.get_future().get();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(c->resp.overall_code(), rls_pb::RateLimitResponse::OK);
  drain.join();
}

// A call still waiting at the deadline is answered if its answer comes within answer_grace (admit serve's failure
// policy answers at the deadline): it was cancelled at the deadline, racing that answer.
TEST(RlsServer, AnAnswerWithinTheGraceIsSent) {
  fixture f(std::chrono::hours(1));
  auto c = f.start_call();
  f.store->wait_held(1);
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now()); });  // a deadline already past
  // The drain has begun once a new call is refused as draining; the held call is still waiting for its decision.
  for (;;) {
    auto probe = f.start_call("no rules");
    const grpc::Status s = probe->status.get_future().get();
    if (!s.ok()) break;
    std::this_thread::yield();
  }
  // (A moment, so that a server without the grace has cancelled the call before its answer comes, and this test fails
  // there each time; with a grace of an hour, the moment decides nothing.)
  std::this_thread::sleep_for(50ms);
  f.store->release_all();
  const grpc::Status s = c->status.get_future().get();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(c->resp.overall_code(), rls_pb::RateLimitResponse::OK);
  drain.join();
}

TEST(RlsServer, DrainDeadlineCancelsTheCallStillWaiting) {
  fixture f(0ms);
  auto c = f.start_call();
  f.store->wait_held(1);
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now()); });  // a deadline already past
  const grpc::Status s = c->status.get_future().get();
  EXPECT_FALSE(s.ok());
  f.store->release_all();  // the decision comes after all: shutdown returns once it has
  drain.join();
}

}  // namespace rls_server_test
}  // namespace admit::serve
