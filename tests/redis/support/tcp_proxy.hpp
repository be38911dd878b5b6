// tests/redis/tcp_proxy.hpp — a loopback TCP forwarder between a client and a redis-server that can swallow the
// server's replies: a command then reaches the server and runs, and its reply never comes back (the "reply lost after
// the script ran" fault, without timing tricks), or the client's requests too (a partition).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace admit::redis::testing {

class tcp_proxy {
 public:
  // Forwards 127.0.0.1:port() to 127.0.0.1:server_port.
  explicit tcp_proxy(unsigned short server_port)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}), server_port_(server_port) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~tcp_proxy() {
    io_.stop();
    thread_.join();
  }
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port()); }
  // While set, bytes from the server are read and dropped instead of forwarded.
  void drop_replies(bool drop) { drop_.store(drop); }
  // While set, bytes from the client are read and dropped instead of forwarded (with drop_replies: a partition;
  // connections are still accepted, and commands sent on them are lost too).
  void drop_requests(bool drop) { drop_up_.store(drop); }
  // Bytes dropped so far.
  std::size_t dropped() const { return dropped_.load(); }
  // Closes every forwarded connection (both sides), as a network failure would; new connections are still accepted.
  void sever() {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      for (auto& w : pipes_) {
        if (auto p = w.lock()) p->close();
      }
      pipes_.clear();
      done.set_value();
    });
    done.get_future().wait();
  }

 private:
  using tcp = boost::asio::ip::tcp;
  struct pipe : std::enable_shared_from_this<pipe> {
    pipe(tcp_proxy& p, tcp::socket c) : proxy(p), client(std::move(c)), server(p.io_) {}
    tcp_proxy& proxy;
    tcp::socket client;
    tcp::socket server;
    std::array<char, 16384> up{}, down{};

    void start() {
      server.async_connect({boost::asio::ip::make_address("127.0.0.1"), proxy.server_port_},
                           [self = shared_from_this()](boost::system::error_code ec) {
                             if (ec) return self->close();
                             self->forward_up();
                             self->forward_down();
                           });
    }
    void forward_up() {
      client.async_read_some(boost::asio::buffer(up), [self = shared_from_this()](auto ec, std::size_t n) {
        if (ec) return self->close();
        if (self->proxy.drop_up_.load()) {
          self->proxy.dropped_.fetch_add(n);
          return self->forward_up();
        }
        boost::asio::async_write(self->server, boost::asio::buffer(self->up, n), [self](auto wec, std::size_t) {
          if (wec) return self->close();
          self->forward_up();
        });
      });
    }
    void forward_down() {
      server.async_read_some(boost::asio::buffer(down), [self = shared_from_this()](auto ec, std::size_t n) {
        if (ec) return self->close();
        if (self->proxy.drop_.load()) {
          self->proxy.dropped_.fetch_add(n);
          return self->forward_down();
        }
        boost::asio::async_write(self->client, boost::asio::buffer(self->down, n), [self](auto wec, std::size_t) {
          if (wec) return self->close();
          self->forward_down();
        });
      });
    }
    void close() {
      boost::system::error_code ignored;
      client.close(ignored);
      server.close(ignored);
    }
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      auto p = std::make_shared<pipe>(*this, std::move(s));
      pipes_.push_back(p);
      p->start();
      accept();
    });
  }

  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  unsigned short server_port_;
  std::atomic<bool> drop_{false};
  std::atomic<bool> drop_up_{false};
  std::atomic<std::size_t> dropped_{0};
  std::vector<std::weak_ptr<pipe>> pipes_;  // touched on the proxy's thread only
  std::thread thread_;
};

}  // namespace admit::redis::testing
