// rediss:// against a real redis-server listening for TLS, with certificates made at run time: round trips, the
// server's certificate checked (CA, name) unless verification is turned off, client certificates, handshake failures
// as error codes with OpenSSL's reason, the connect timeout covering the handshake, a limiter and the semaphore over
// TLS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/detached.hpp>
#include <cctype>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "tls_certificates.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::connection;
using admit::redis::reply;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::tls_certificates;

class RedisTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new tls_certificates(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static redis_server::config tls_config(bool auth_clients = false) {
    redis_server::config c;
    c.tls_cert_file = certs_->server_cert();
    c.tls_key_file = certs_->server_key();
    c.tls_ca_file = certs_->ca();
    c.tls_auth_clients = auth_clients;
    return c;
  }
  // A URL query value: the paths may hold any character.
  static std::string escaped(const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '/' || c == '.' || c == '-' || c == '_') {
        out.push_back(c);
      } else {
        static const char hex[] = "0123456789ABCDEF";
        out += {'%', hex[(static_cast<unsigned char>(c) >> 4) & 0xF], hex[static_cast<unsigned char>(c) & 0xF]};
      }
    }
    return out;
  }
  static std::string ca_query(const std::string& ca) { return "ca_file=" + escaped(ca); }

  static tls_certificates* certs_;
};
tls_certificates* RedisTls::certs_ = nullptr;

TEST_F(RedisTls, RoundTripsOverTls) {
  redis_server server(tls_config());
  io_thread io;
  // 127.0.0.1: checked against the certificate's IP addresses.
  connection conn(io.executor(), server.tls_url(ca_query(certs_->ca()), 2));
  ASSERT_FALSE(conn.connect()) << conn.last_error();
  EXPECT_TRUE(conn.execute("SET", "k", "over tls").ok());
  EXPECT_EQ(conn.execute("GET", "k").value, reply::string("over tls"));
  EXPECT_EQ(server.admin({"GET", "k"}, 2), "over tls");  // database 2 selected
  // Many calls pipelined through the TLS stream, replies in order.
  for (int i = 0; i < 500; ++i) conn.async_execute("INCR", "n", boost::asio::detached);
  EXPECT_EQ(conn.execute("GET", "n").value, reply::string("500"));

  // By name: "localhost" is in the certificate.
  connection by_name(io.executor(), server.tls_url(ca_query(certs_->ca()) + "&server_name=localhost"));
  EXPECT_EQ(by_name.execute("PING").value, reply::status("PONG")) << by_name.last_error();
}

TEST_F(RedisTls, AnUntrustedCertificateIsAVerifyError) {
  redis_server server(tls_config());
  io_thread io;
  connection conn(io.executor(), server.tls_url(ca_query(certs_->other_ca())));
  EXPECT_EQ(conn.connect(), errc::tls_verify_failed);
  EXPECT_EQ(conn.last_connect_error(), errc::tls_verify_failed);
  // OpenSSL's reason: "self-signed certificate in certificate chain" (the server sends its CA) or "unable to get local
  // issuer certificate" (it does not).
  EXPECT_NE(conn.last_error().find("server certificate not accepted: "), std::string::npos) << conn.last_error();
  EXPECT_NE(conn.last_error().find(std::to_string(server.tls_port())), std::string::npos) << conn.last_error();

  // Verification off: the same server is accepted.
  connection insecure(io.executor(), server.tls_url(ca_query(certs_->other_ca()) + "&insecure_skip_verify=true"));
  EXPECT_EQ(insecure.execute("PING").value, reply::status("PONG")) << insecure.last_error();
}

TEST_F(RedisTls, AWrongServerNameIsAVerifyError) {
  redis_server server(tls_config());
  io_thread io;
  connection conn(io.executor(), server.tls_url(ca_query(certs_->ca()) + "&server_name=redis.example.com"));
  EXPECT_EQ(conn.connect(), errc::tls_verify_failed);
  EXPECT_NE(conn.last_error().find("hostname mismatch"), std::string::npos) << conn.last_error();

  auto o = admit::redis::parse_url(server.tls_url(ca_query(certs_->ca())));
  o.tls_server_name = "192.0.2.1";  // an address the certificate does not name
  connection by_address(io.executor(), o);
  EXPECT_EQ(by_address.connect(), errc::tls_verify_failed);
  EXPECT_NE(by_address.last_error().find("IP address mismatch"), std::string::npos) << by_address.last_error();
}

TEST_F(RedisTls, AClientCertificateWhenTheServerRequiresOne) {
  redis_server server(tls_config(true));
  io_thread io;
  connection without(io.executor(), server.tls_url(ca_query(certs_->ca())));
  EXPECT_EQ(without.connect(), errc::tls_handshake_failed);
  EXPECT_NE(without.last_error().find("refused by the server: tlsv13 alert certificate required"), std::string::npos)
      << without.last_error();

  auto o = admit::redis::parse_url(server.tls_url(ca_query(certs_->ca())));
  o.tls_cert_file = certs_->client_cert();
  o.tls_key_file = certs_->client_key();
  connection with(io.executor(), o);
  EXPECT_FALSE(with.connect()) << with.last_error();
  EXPECT_EQ(with.execute("PING").value, reply::status("PONG"));
}

TEST_F(RedisTls, TlsToAPlainPortTimesOutInTheHandshake) {
  redis_server server(tls_config());
  io_thread io;
  auto o = admit::redis::parse_url(server.tls_url(ca_query(certs_->ca())));
  o.port = server.port();  // the plain port: it takes the ClientHello for an unfinished command and waits
  o.connect_timeout = 300ms;
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::connect_timeout);
  EXPECT_NE(conn.last_error().find("TLS handshake with 127.0.0.1:" + std::to_string(server.port()) + ": timed out"),
            std::string::npos)
      << conn.last_error();
}

TEST_F(RedisTls, AServerThatIsNotTlsAtAllIsAHandshakeError) {
  // A server that answers the ClientHello with plain text and closes: not a TLS record.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread plain([fd] {
    const int client = ::accept(fd, nullptr, nullptr);
    if (client < 0) return;
    const char text[] = "-ERR this is not TLS\r\n";
    (void)::write(client, text, sizeof text - 1);
    ::close(client);
  });
  io_thread io;
  auto o = admit::redis::parse_url("rediss://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  o.tls_ca_file = certs_->ca();
  o.reconnect_initial = o.reconnect_max = 1h;  // one attempt
  connection conn(io.executor(), o);
  EXPECT_EQ(conn.connect(), errc::tls_handshake_failed);
  EXPECT_NE(conn.last_error().find("TLS handshake with 127.0.0.1:"), std::string::npos) << conn.last_error();
  plain.join();
  ::close(fd);
}

TEST_F(RedisTls, TheConnectTimeoutCoversTheHandshake) {
  // A listener that never accepts: the kernel completes the TCP connection, nobody answers the ClientHello.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  io_thread io;
  auto o = admit::redis::parse_url("rediss://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  o.tls_ca_file = certs_->ca();
  o.connect_timeout = 200ms;
  connection conn(io.executor(), o);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(conn.connect(), errc::connect_timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  conn.close_for(0s);
  ::close(fd);
}

TEST_F(RedisTls, AnUnreadableCaFileThrowsNamingIt) {
  io_thread io;
  auto o = admit::redis::parse_url("rediss://127.0.0.1:1");
  o.tls_ca_file = "/nonexistent dir/ca.pem";
  try {
    connection conn(io.executor(), o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tls_ca_file '/nonexistent dir/ca.pem'"), std::string::npos) << e.what();
  }
  o.tls_ca_file = certs_->ca();
  o.tls_cert_file = certs_->client_cert();
  o.tls_key_file = certs_->server_key();  // not the certificate's key
  EXPECT_THROW(connection(io.executor(), o), std::invalid_argument);
}

TEST_F(RedisTls, ALimiterAndTheSemaphoreWorkOverTls) {
  redis_server server(tls_config());
  io_thread io;
  connection conn(io.executor(), server.tls_url(ca_query(certs_->ca())));
  admit::redis::gcra limiter(conn, "tls", admit::rate::per_second(1), 3, admit::redis::testing::patient());
  int admitted = 0;
  for (int i = 0; i < 5; ++i) {
    const auto r = limiter.decide("user");
    ASSERT_TRUE(r.consulted) << r.error.message() << " " << conn.last_error();
    admitted += r.decision.admitted ? 1 : 0;
  }
  EXPECT_EQ(admitted, 3);

  admit::redis::semaphore s(conn, "tls", 1);
  auto held = s.try_acquire();
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_EQ(s.try_acquire().error(), admit::errc::would_block);
  EXPECT_EQ(held->release().first, admit::redis::lease::release_status::released);
  EXPECT_TRUE(s.try_acquire_for(5s));
}

}  // namespace
