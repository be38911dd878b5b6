// The HTTP server's drain (serve/http/http_server.hpp): while a request is in flight the port stays open and answers
// (health 500), then idle keep-alive connections close, the request in flight is answered (with Connection: close),
// one still waiting for its decision past the deadline and its grace loses its connection, one answered within the
// grace keeps it, and shutdown returns once its decision has come. The backend holds each decision until the test lets
// it go, so nothing here depends on timing.
#include "serve/http/http_server.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "held_backend.hpp"

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace http_server_test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

using testing::held_backend;
using testing::one_rule;

struct fixture {
  held_backend* store = nullptr;
  std::unique_ptr<service> svc;
  std::unique_ptr<http_server> server;

  explicit fixture(std::size_t max_connections = http_server_options{}.max_connections,
                   std::unique_ptr<backend> other = nullptr,
                   std::chrono::milliseconds answer_grace = http_server_options{}.answer_grace) {
    std::unique_ptr<backend> b = std::make_unique<held_backend>();
    if (other) b = std::move(other);
    store = dynamic_cast<held_backend*>(b.get());
    svc = std::make_unique<service>(std::move(b), one_rule(), service_options{});
    http_server_options opts;
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.threads = 1;
    opts.max_connections = max_connections;
    opts.answer_grace = answer_grace;
    server = std::make_unique<http_server>(*svc, opts);
    server->set_serving(true);
  }
};

// A blocking HTTP/1.1 client on one connection.
struct client {
  net::io_context io;
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;

  explicit client(int port, const char* address = "127.0.0.1") {
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address(address), static_cast<unsigned short>(port)));
  }
  // The answer, or an error code when the connection ended first.
  std::pair<beast::error_code, http::response<http::string_body>> ask(http::verb verb, const std::string& target,
                                                                      const std::string& body = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "test");
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    beast::error_code ec;
    http::write(stream, req, ec);
    if (!ec) http::read(stream, buffer, res, ec);
    return {ec, std::move(res)};
  }
  // Whether the server closed the connection (a read ends without data).
  bool closed_by_server() {
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(stream, buffer, res, ec);
    return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset;
  }
};

const std::string json_request = R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";

TEST(HttpServer, AnswersJsonAndHealth) {
  fixture f;
  client c(f.server->port());
  auto answer = std::async(std::launch::async, [&] { return c.ask(http::verb::post, "/json", json_request); });
  f.store->wait_held(1);
  f.store->release_all();
  auto [ec, res] = answer.get();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_NE(res.body().find(R"("overallCode":"OK")"), std::string::npos) << res.body();
  EXPECT_NE(res.body().find(R"("limitRemaining":4)"), std::string::npos) << res.body();
  auto [ec2, health] = c.ask(http::verb::get, "/healthcheck");
  ASSERT_FALSE(ec2);
  EXPECT_EQ(health.result(), http::status::ok);
  EXPECT_EQ(health.body(), "OK");
  f.server->set_serving(false);
  auto [ec3, draining] = c.ask(http::verb::get, "/healthcheck");
  ASSERT_FALSE(ec3);
  EXPECT_EQ(draining.result(), http::status::internal_server_error);
}

// `Expect: 100-continue` (curl sends it for a body over 1 KiB, then waits a second for the interim answer): the header
// alone gets "100 Continue", then the body its answer. A body over the limit is refused on its Content-Length, with no
// "100 Continue" and before the client sends it.
TEST(HttpServer, AnExpectationOfContinueIsAnsweredBeforeTheBody) {
  fixture f;
  client c(f.server->port());
  // A server that never answers the header alone fails the test in 30 s instead of holding it (the reads block).
  const timeval patience{30, 0};
  ASSERT_EQ(::setsockopt(c.stream.socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience), 0);
  const std::string head =
      "POST /json HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(json_request.size()) + "\r\n\r\n";
  net::write(c.stream, net::buffer(head));
  http::response_parser<http::empty_body> interim_parser;
  beast::error_code ec;
  http::read_header(c.stream, c.buffer, interim_parser, ec);  // (blocks until the server answers the header alone)
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(interim_parser.get().result(), http::status::continue_);
  auto answer = std::async(std::launch::async, [&] {
    net::write(c.stream, net::buffer(json_request));
    http::response<http::string_body> res;
    beast::error_code read_ec;
    http::read(c.stream, c.buffer, res, read_ec);
    return std::pair{read_ec, std::move(res)};
  });
  f.store->wait_held(1);
  f.store->release_all();
  auto [read_ec, res] = answer.get();
  ASSERT_FALSE(read_ec) << read_ec.message();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_NE(res.body().find(R"("overallCode":"OK")"), std::string::npos) << res.body();

  client big(f.server->port());
  const std::string too_large = "POST /json HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: " +
                                std::to_string(http_server_options{}.max_body_bytes + 1) + "\r\n\r\n";
  net::write(big.stream, net::buffer(too_large));
  http::response<http::string_body> refused;
  http::read(big.stream, big.buffer, refused, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(refused.result(), http::status::payload_too_large);
}

// An IPv6 address is named in brackets where it cannot listen, so that its port stays readable ("[::1]:8080", not
// "::1:8080"). Where the machine has no IPv6 loopback the first server already fails, with the same address.
TEST(HttpServer, CannotListenNamesAnIpv6AddressInBrackets) {
  service svc(std::make_unique<held_backend>(), one_rule(), service_options{});
  http_server_options opts;
  opts.host = "::1";
  opts.port = 0;
  opts.threads = 1;
  std::unique_ptr<http_server> first;
  try {
    first = std::make_unique<http_server>(svc, opts);
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen for HTTP on [::1]:0: "), std::string::npos) << e.what();
    return;
  }
  opts.port = first->port();
  try {
    http_server second(svc, opts);
    ADD_FAILURE() << "a second server listened on the same port";
  } catch (const std::runtime_error& e) {
    const std::string expected = "cannot listen for HTTP on [::1]:" + std::to_string(opts.port) + ": ";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  first->shutdown(std::chrono::system_clock::now());
}

// 0.0.0.0 (admit serve's default host) listens on IPv6 too, as the gRPC port does: `curl localhost:8080` that tries
// ::1 first is answered there. Where the machine has no IPv6 loopback, the IPv4 half is all there is to check.
TEST(HttpServer, TheUnspecifiedIpv4AddressListensOnIpv6Too) {
  service svc(std::make_unique<testing::held_backend>(), one_rule(), service_options{});
  http_server_options opts;
  opts.host = "0.0.0.0";
  opts.port = 0;
  opts.threads = 1;
  http_server server(svc, opts);
  server.set_serving(true);
  std::vector<const char*> addresses{"127.0.0.1"};
  {
    net::io_context io;
    net::ip::tcp::socket probe(io);
    beast::error_code ec;
    probe.open(net::ip::tcp::v6(), ec);
    if (!ec) probe.bind(net::ip::tcp::endpoint(net::ip::make_address("::1"), 0), ec);
    if (!ec) addresses.push_back("::1");
  }
  for (const char* address : addresses) {
    client c(server.port(), address);
    auto [ec, health] = c.ask(http::verb::get, "/healthcheck");
    ASSERT_FALSE(ec) << address << ": " << ec.message();
    EXPECT_EQ(health.result(), http::status::ok) << address;
  }
  server.shutdown(std::chrono::system_clock::now());
}

TEST(HttpServer, AConnectionBeyondMaxConnectionsIsClosed) {
  fixture f(1);
  client a(f.server->port());
  auto [ec, health] = a.ask(http::verb::get, "/healthcheck");  // a is held open by the server now
  ASSERT_FALSE(ec) << ec.message();
  client b(f.server->port());
  auto [refused, unanswered] = b.ask(http::verb::get, "/healthcheck");  // closed at once: no answer
  EXPECT_TRUE(refused) << unanswered.result_int();
  auto [ec2, again] = a.ask(http::verb::get, "/healthcheck");  // the one within the bound is still served
  ASSERT_FALSE(ec2) << ec2.message();
  EXPECT_EQ(again.result(), http::status::ok);
}

// Keeps the decision's completion, then throws (as a backend that fails after it queued part of a request).
class throws_after_keeping final : public backend {
 public:
  void decide(std::shared_ptr<pending_decision> call) override {
    const std::lock_guard lock(mutex_);
    held_.push_back(std::move(call));
    throw std::runtime_error("backend broke");
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}
  void complete_all() {
    std::vector<std::shared_ptr<pending_decision>> taken;
    {
      const std::lock_guard lock(mutex_);
      taken.swap(held_);
    }
    for (auto& call : taken) call->complete();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<pending_decision>> held_;
};

// What the service throws is a 500 on that request (it ended the process), and the completion the backend kept
// before throwing, coming later, answers nothing twice: the connection goes on serving.
TEST(HttpServer, ABackendThatThrowsIsAnswered500) {
  auto b = std::make_unique<throws_after_keeping>();
  throws_after_keeping* store = b.get();
  fixture f(10, std::move(b));
  client c(f.server->port());
  auto [ec, res] = c.ask(http::verb::post, "/json", json_request);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result(), http::status::internal_server_error) << res.body();
  EXPECT_NE(res.body().find("backend broke"), std::string::npos) << res.body();
  store->complete_all();
  auto [ec2, health] = c.ask(http::verb::get, "/healthcheck");
  ASSERT_FALSE(ec2) << ec2.message();
  EXPECT_EQ(health.result(), http::status::ok);
}

// While the request in flight waits, the port stays open and answers: a prober's connection (kept alive, or new) gets
// GET /healthcheck 500, not a refused connection (it was refused: the port closed as the drain began). Once the request
// is answered, the idle connections close.
TEST(HttpServer, DrainKeepsThePortOpenWhileARequestIsInFlight) {
  fixture f;
  client idle(f.server->port());
  ASSERT_FALSE(idle.ask(http::verb::get, "/healthcheck").first);  // accepted, now idle between requests
  client busy(f.server->port());
  auto answer = std::async(std::launch::async, [&] { return busy.ask(http::verb::post, "/json", json_request); });
  f.store->wait_held(1);
  f.server->set_serving(false);  // as admit serve's drain does first
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now() + 1h); });
  // (EXPECT, not ASSERT, from here: the decision is let go and the drain joined whatever fails.)
  auto [kept_ec, kept] = idle.ask(http::verb::get, "/healthcheck");
  EXPECT_FALSE(kept_ec) << kept_ec.message();
  EXPECT_EQ(kept.result(), http::status::internal_server_error);
  client prober(f.server->port());
  auto [new_ec, probed] = prober.ask(http::verb::get, "/healthcheck");
  EXPECT_FALSE(new_ec) << new_ec.message();
  EXPECT_EQ(probed.result(), http::status::internal_server_error);
  f.store->release_all();
  auto [ec, res] = answer.get();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_TRUE(prober.closed_by_server());
  drain.join();
}

// A decision that comes past the deadline but within the grace is written: admit serve answers what still waits at
// the deadline by its failure policy (the connection was closed first, the client got no answer).
TEST(HttpServer, AnAnswerWithinTheGraceIsWritten) {
  fixture f(http_server_options{}.max_connections, nullptr, std::chrono::hours(1));
  client busy(f.server->port());
  auto answer = std::async(std::launch::async, [&] { return busy.ask(http::verb::post, "/json", json_request); });
  f.store->wait_held(1);
  f.server->set_serving(false);  // as admit serve's drain does first
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now()); });  // a deadline already past
  // Past the deadline the port closes (nothing else is in flight): the decision comes after that.
  const auto refused = [&] {
    try {
      client probe(f.server->port());
      return false;
    } catch (const std::exception&) {
      return true;
    }
  };
  for (int i = 0; i < 10'000 && !refused(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(refused());  // (EXPECT: the decision is let go and the drain joined whatever fails)
  f.store->release_all();
  auto [ec, res] = answer.get();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_FALSE(res.keep_alive());
  drain.join();
}

TEST(HttpServer, DrainDeadlineClosesTheConnectionStillWaiting) {
  fixture f(http_server_options{}.max_connections, nullptr, std::chrono::milliseconds(0));
  client busy(f.server->port());
  auto answer = std::async(std::launch::async, [&] { return busy.ask(http::verb::post, "/json", json_request); });
  f.store->wait_held(1);
  std::thread drain([&] { f.server->shutdown(std::chrono::system_clock::now()); });  // a deadline already past
  auto [ec, res] = answer.get();
  EXPECT_TRUE(ec) << "answered " << res.result_int();
  f.store->release_all();  // the decision comes after all: shutdown returns once it has
  drain.join();
}

}  // namespace http_server_test
}  // namespace admit::serve
