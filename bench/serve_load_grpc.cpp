// admit_serve_load --mode grpc: ShouldRateLimit calls on gRPC's asynchronous client API. Each client thread owns a
// CompletionQueue and its share of the streams; a stream is one call slot that, as soon as its call finishes, issues
// the next (a fresh ClientContext each time, as gRPC requires) until the window closes.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "serve_load.hpp"

namespace admit::bench::serve_load {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;

struct call_slot {
  rls::RateLimitService::Stub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  rls::RateLimitRequest request;
  rls::RateLimitResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<rls::RateLimitResponse>> reader;
  clock_type::time_point issued;
};

// The request of the next call: the domain, then the descriptors with fresh values (the entries are kept, only their
// values change, so that the message's memory is reused).
void fill(rls::RateLimitRequest& req, const settings& s, value_source& values) {
  if (req.descriptors_size() == 0) {
    req.set_domain(s.domain);
    if (s.hits_addend != 0) req.set_hits_addend(s.hits_addend);
    for (const auto& d : s.descriptors) {
      auto* desc = req.add_descriptors();
      for (const auto& [key, pattern] : d) desc->add_entries()->set_key(key);
    }
  }
  for (std::size_t i = 0; i < s.descriptors.size(); ++i) {
    auto* desc = req.mutable_descriptors(static_cast<int>(i));
    for (std::size_t e = 0; e < s.descriptors[i].size(); ++e) {
      desc->mutable_entries(static_cast<int>(e))->set_value(values.value(s.descriptors[i][e].second));
    }
  }
}

void issue(call_slot& slot, const settings& s, value_source& values, grpc::CompletionQueue& cq) {
  fill(slot.request, s, values);
  slot.context = std::make_unique<grpc::ClientContext>();
  slot.context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(s.timeout_ms));
  slot.response.Clear();
  slot.issued = clock_type::now();
  slot.reader = slot.stub->PrepareAsyncShouldRateLimit(slot.context.get(), slot.request, &cq);
  slot.reader->StartCall();
  slot.reader->Finish(&slot.response, &slot.status, &slot);
}

answer classify(const rls::RateLimitResponse& res, const settings& s) {
  if (static_cast<std::size_t>(res.statuses_size()) != s.descriptors.size()) return answer::bad;
  bool unlimited = false;
  for (const auto& st : res.statuses()) {
    if (st.code() != rls::RateLimitResponse::OK && st.code() != rls::RateLimitResponse::OVER_LIMIT) return answer::bad;
    if (!st.has_current_limit()) unlimited = true;
  }
  if (unlimited && s.require_limit) return answer::unlimited;
  switch (res.overall_code()) {
    case rls::RateLimitResponse::OK:
      return answer::ok;
    case rls::RateLimitResponse::OVER_LIMIT:
      return answer::over_limit;
    default:
      return answer::bad;
  }
}

std::string status_name(grpc::StatusCode c) {
  static const char* const names[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  const auto i = static_cast<std::size_t>(c);
  return "grpc " + std::string(i < std::size(names) ? names[i] : "status " + std::to_string(i));
}

}  // namespace

recorder run_grpc(const settings& s) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs;
  for (int i = 0; i < s.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own per channel
    auto ch = grpc::CreateCustomChannel(s.target, grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      throw std::runtime_error("cannot connect to " + s.target + " within 10 s");
    }
    stubs.push_back(rls::RateLimitService::NewStub(ch));
    channels.push_back(std::move(ch));
  }

  std::vector<recorder> tallies(static_cast<std::size_t>(s.threads));
  const window w = make_window(s);
  std::vector<std::thread> threads;
  for (int t = 0; t < s.threads; ++t) {
    threads.emplace_back([&, t] {
      recorder& r = tallies[static_cast<std::size_t>(t)];
      r.latencies_ns.reserve(1U << 20U);
      value_source values(s, static_cast<std::uint64_t>(t) + 1);
      grpc::CompletionQueue cq;
      // This thread's streams: t, t + threads, ... (stream i on channel i % channels).
      std::vector<std::unique_ptr<call_slot>> slots;
      for (int i = t; i < s.streams; i += s.threads) {
        auto slot = std::make_unique<call_slot>();
        slot->stub = stubs[static_cast<std::size_t>(i % s.channels)].get();
        slots.push_back(std::move(slot));
      }
      std::size_t outstanding = 0;
      for (auto& slot : slots) {
        issue(*slot, s, values, cq);
        ++outstanding;
      }
      void* tag = nullptr;
      bool ok = false;
      while (outstanding > 0 && cq.Next(&tag, &ok)) {
        auto& slot = *static_cast<call_slot*>(tag);
        const auto done = clock_type::now();
        if (!ok) {
          record_error(r, w, done, "grpc completion queue: not ok");
        } else if (!slot.status.ok()) {
          record_error(r, w, done, status_name(slot.status.error_code()));
        } else {
          record_answer(r, w, done, done - slot.issued, classify(slot.response, s));
        }
        if (w.issuing(done)) {
          issue(slot, s, values, cq);
        } else {
          --outstanding;
        }
      }
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    });
  }
  for (auto& th : threads) th.join();
  recorder all;
  for (const auto& r : tallies) all.merge(r);
  return all;
}

}  // namespace admit::bench::serve_load
