#include "serve/grpc/rls_server.hpp"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/host_port.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "serve/command/log.hpp"

namespace admit::serve {
namespace {

// protobuf reports a proto3 `string` field that is not UTF-8 through its log, not through the parse's result: the
// handler below keeps that line for the call parsing on this thread (the call's answer then names the field), and
// sends every other protobuf log line to admit serve's log.
thread_local std::string* parse_problem = nullptr;

void protobuf_log(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (parse_problem != nullptr) {
    if (parse_problem->empty()) *parse_problem = message;
    return;
  }
  log::write(level >= google::protobuf::LOGLEVEL_ERROR ? log::level::error : log::level::warn, "protobuf",
             {{"detail", message}, {"source", std::string(file) + ":" + std::to_string(line)}});
}

// gRPC's own messages, as lines of the log (they were written to stderr in gRPC's format, several lines each): its
// errors as warnings — what they mean for the service (a port that cannot be bound) the service says itself, at error
// level — and the rest at debug level.
// While the server starts, this thread's gRPC messages are held instead (a failed bind is a 1.5 KB error tree that
// the service's own message says in a line): written once the start succeeded, at debug level when it failed.
struct grpc_message {
  log::level level;
  std::string detail, source;
};
thread_local std::vector<grpc_message>* held_messages = nullptr;
// Holds this thread's gRPC messages while it lives.
struct grpc_messages_held {
  grpc_messages_held() { held_messages = &messages; }
  ~grpc_messages_held() { held_messages = nullptr; }
  grpc_messages_held(const grpc_messages_held&) = delete;
  grpc_messages_held& operator=(const grpc_messages_held&) = delete;
  std::vector<grpc_message> messages;
};

void grpc_log(gpr_log_func_args* args) {
  const log::level l = args->severity == GPR_LOG_SEVERITY_ERROR ? log::level::warn : log::level::debug;
  const auto source = [args] { return std::string(args->file) + ":" + std::to_string(args->line); };
  if (held_messages != nullptr) {
    held_messages->push_back({l, args->message, source()});
    return;
  }
  if (!log::enabled(l)) return;
  log::write(l, "grpc", {{"detail", args->message}, {"source", source()}});
}

// Writes the messages held while the server started: as gRPC ranked them, or all at debug level.
void write_held(const std::vector<grpc_message>& messages, bool started) {
  for (const grpc_message& m : messages) {
    const log::level l = started ? m.level : log::level::debug;
    if (log::enabled(l)) log::write(l, "grpc", {{"detail", m.detail}, {"source", m.source}});
  }
}

// "String field 'a.b.Entry.key' contains invalid UTF-8 data when parsing..." → "field a.b.Entry.key is not valid
// UTF-8"; anything else as protobuf said it.
std::string parse_failure(const std::string& problem) {
  if (problem.empty()) return "the request is not a valid RateLimitRequest (a truncated or malformed message)";
  const auto open = problem.find('\'');
  const auto close = open == std::string::npos ? open : problem.find('\'', open + 1);
  if (problem.find("invalid UTF-8") != std::string::npos && close != std::string::npos) {
    return "the request's field " + problem.substr(open + 1, close - open - 1) +
           " is not valid UTF-8 (proto3 string fields must be)";
  }
  return "the request is not a valid RateLimitRequest: " + problem;
}

// Why `host:port` cannot be bound, asked of the system (gRPC says only that listening failed): binds a socket of each
// address the host resolves to, as gRPC does (SO_REUSEADDR), and returns the first error ("Address already in use").
std::string bind_failure(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return std::string("not an address of this host (") + ::gai_strerror(rc) + ")";
  }
  std::string why;
  for (const addrinfo* a = found; a != nullptr && why.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (why == std::strerror(EADDRINUSE)) {
    why += " (another admit serve, or another program, listens on port " + service + ")";
  }
  return why.empty() ? "gRPC could not listen there" : why;
}

// A message of type M for each thread, reused by the calls it runs: parsing into it (which clears it first) or filling
// it again after Clear() reuses the strings and the repeated fields' elements an earlier call allocated, so that a
// request or response of the usual shape costs no allocation. Used by one call at a time on a thread: the handler
// between parsing and from_proto, a completion between to_proto and serializing (neither calls out meanwhile).
template <class M>
M& thread_message() {
  thread_local M message;
  return message;
}

// Drops what a thread's message grew to once a large message (up to the receive limit) went through it, so that the
// thread does not keep that memory.
template <class M>
class message_use {
 public:
  static constexpr std::size_t keep_bytes = 16 * 1024;
  message_use(M& m, std::size_t bytes) : m_(m), large_(bytes > keep_bytes) {}
  message_use(const message_use&) = delete;
  message_use& operator=(const message_use&) = delete;
  ~message_use() {
    if (large_) m_ = M();
  }

 private:
  M& m_;
  bool large_;
};

// `m` serialized into one slice of its exact size, `size`: what m.ByteSizeLong() just returned (gRPC's own Serialize
// writes messages above a few bytes through a zero-copy stream, which costs more for the small answers this server
// sends).
grpc::Status serialize(const google::protobuf::MessageLite& m, std::size_t size, grpc::ByteBuffer& out) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the answer is larger than protobuf can write");
  }
  grpc::Slice slice(size);
  m.SerializeWithCachedSizesToArray(const_cast<std::uint8_t*>(slice.begin()));
  grpc::ByteBuffer whole(&slice, 1);
  out.Swap(&whole);
  return grpc::Status::OK;
}

class rls_handler final
    : public rls_pb::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<rls_pb::RateLimitService::Service> {
 public:
  rls_handler(service& svc, request_limits limits) : svc_(svc), limits_(limits) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override {
    const auto arrived = std::chrono::steady_clock::now();
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // Counted before draining_ is read: a drain that starts later waits for this call (see drain()).
    in_flight_.fetch_add(1);
    if (draining_.load()) {
      in_flight_.fetch_sub(1);
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining: this instance is shutting down"));
      return reactor;
    }
    const auto finish = [this, reactor](const grpc::Status& status) {
      reactor->Finish(status);
      in_flight_.fetch_sub(1);
    };
    const auto refuse = [&](const std::string& why) {
      svc_.record_invalid_request(std::chrono::steady_clock::now() - arrived);
      log::debug("grpc request refused", {{"reason", why}});
      finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why));
      return reactor;
    };
    rls_request req;
    {
      rls_pb::RateLimitRequest& message = thread_message<rls_pb::RateLimitRequest>();
      const message_use in_use(message, request->Length());
      bool parsed = false;
      std::string problem;
      {
        parse_problem = &problem;
        grpc::Slice whole;
        if (request->TrySingleSlice(&whole).ok()) {  // the usual case: parsed in place
          parsed = message.ParseFromArray(whole.begin(), static_cast<int>(whole.size()));
        } else {
          grpc::ByteBuffer copy(*request);  // ProtoBufferReader takes a mutable buffer; copying shares the slices
          grpc::ProtoBufferReader reader(&copy);
          parsed = reader.status().ok() && message.ParseFromZeroCopyStream(&reader);
        }
        parse_problem = nullptr;
      }
      if (!parsed) return refuse(parse_failure(problem));
      if (auto refused = from_proto(message, limits_, req)) return refuse(*refused);
    }
    // Finish is called once: by the decision's completion, or by the catch below when the service threw (it then
    // never calls the completion). The completion must not throw: a failure to build the answer is answered.
    try {
      svc_.should_rate_limit(std::move(req), [finish, response](rls_result&& result) {
        if (result.failure) {
          finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, result.failure->message));
          return;
        }
        grpc::Status serialized;
        try {
          rls_pb::RateLimitResponse& out = thread_message<rls_pb::RateLimitResponse>();
          out.Clear();
          to_proto(result.response, out);
          const std::size_t size = out.ByteSizeLong();
          const message_use in_use(out, size);
          serialized = serialize(out, size, *response);
        } catch (const std::exception& e) {
          serialized = grpc::Status(grpc::StatusCode::INTERNAL, std::string("the answer failed: ") + e.what());
        }
        finish(serialized);
      });
    } catch (const std::exception& e) {
      log::error("decision failed", {{"error", e.what()}});
      finish(grpc::Status(grpc::StatusCode::INTERNAL, std::string("the decision failed: ") + e.what()));
    }
    return reactor;
  }

  // From now on calls are answered UNAVAILABLE; waits until those in flight are answered, or `deadline`.
  void drain(std::chrono::system_clock::time_point deadline) {
    draining_.store(true);
    while (in_flight_.load() > 0 && std::chrono::system_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  service& svc_;
  request_limits limits_;
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> in_flight_{0};  // calls started and not yet finished
};

}  // namespace

struct rls_server::impl {
  impl(service& svc, const rls_server_options& opts) : handler(svc, opts.limits), answer_grace(opts.answer_grace) {}
  rls_handler handler;
  std::chrono::milliseconds answer_grace;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  admit::detail::mutex shutdown_mutex;
  bool stopped ADMIT_GUARDED_BY(shutdown_mutex) = false;
};

rls_server::rls_server(service& svc, const rls_server_options& opts) {
  if (opts.answer_grace.count() < 0) {
    throw std::invalid_argument("rls_server: answer_grace must not be negative, got " +
                                std::to_string(opts.answer_grace.count()) + " ms");
  }
  impl_ = std::make_unique<impl>(svc, opts);
  static std::once_flag process_setup_once;
  std::call_once(process_setup_once, [] {
    google::protobuf::SetLogHandler(&protobuf_log);
    gpr_set_log_function(&grpc_log);
    // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock detection on: every lock gRPC takes
    // (several per call) then records the order of locks in a process-wide graph, a check meant for debug builds.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const std::string address = admit::detail::host_port(opts.host, static_cast<unsigned>(opts.port));
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, opts.reuse_port ? 1 : 0);
  builder.SetMaxReceiveMessageSize(opts.max_receive_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, opts.max_concurrent_streams);
  grpc::ResourceQuota quota("admit-serve");
  quota.Resize(opts.max_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&impl_->handler);
  bool started = false;
  {
    grpc_messages_held held;
    impl_->server = builder.BuildAndStart();
    started = impl_->server && impl_->port != 0;
    write_held(held.messages, started);
  }
  if (!started) {
    throw std::runtime_error("cannot listen for gRPC on " + address + ": " + bind_failure(opts.host, opts.port));
  }
  set_serving(true);
}

rls_server::~rls_server() {
  if (impl_) shutdown(std::chrono::system_clock::now());
}

int rls_server::port() const noexcept { return impl_->port; }

void rls_server::set_serving(bool serving) {
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus("ratelimit", serving);
  health->SetServingStatus(rls_pb::RateLimitService::service_full_name(), serving);
}

void rls_server::shutdown(std::chrono::system_clock::time_point deadline) {
  const admit::detail::lock_guard lock(impl_->shutdown_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  set_serving(false);
  // The rate-limit calls in flight are answered first (new ones are refused meanwhile); then the server shuts down
  // with what is left cancelled at once — the health service's Watch streams, which would otherwise hold the drain
  // until its deadline (they never end by themselves) — after a moment for the last answers to be written. A call
  // still waiting at the deadline has answer_grace more: admit serve answers it then by the failure policy, and
  // cancelling it at that instant would race that answer.
  const auto last = deadline + impl_->answer_grace;
  impl_->handler.drain(last);
  impl_->server->Shutdown(std::min(last, std::chrono::system_clock::now() + std::chrono::milliseconds(100)));
  impl_->server->Wait();
}

}  // namespace admit::serve
