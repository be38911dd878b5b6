// tests/redis/support/tcp_proxy.hpp — a loopback TCP forwarder between a client and a redis-server that fails as a
// network does: it can swallow the server's replies (a command reaches the server and runs, and its reply never comes
// back: the "reply lost after the script ran" fault, without timing tricks) or the client's requests too (a black
// hole: nothing forwarded, neither FIN nor RST sent), delay every reply, reset a connection in the middle of a reply,
// sever every connection, and heal.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
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
  // The connections black-holed (true) or flowing again (false). While black-holed nothing is forwarded either way and
  // nothing is closed: the bytes wait in the sockets' buffers (and TCP's flow control stops a sender once they are
  // full), as behind a dead link that TCP keeps retransmitting over — neither FIN nor RST, a peer sees silence. Healed,
  // what waited is delivered, in order, late.
  void black_hole(bool on) { paused_.store(on); }
  // Black-holes the connections (as black_hole(true)) right after the first reply chunk containing `text` reaches the
  // client: Redis falls silent after a given answer, whenever the client gets to its next call. Set before the client
  // connects.
  void black_hole_after(std::string text) {
    const std::lock_guard lock(trigger_mutex_);
    trigger_ = std::move(text);
  }
  // Every reply chunk is held this long from its arrival before it is forwarded (order kept); zero: none.
  void delay_replies(std::chrono::milliseconds delay) { delay_ns_.store(std::chrono::nanoseconds(delay).count()); }
  // The next chunk of a reply is cut: its first half is forwarded, then that connection is reset (RST to the client,
  // the server's side closed). Once; resets_done() counts the resets made.
  void reset_mid_reply() { reset_armed_.store(true); }
  std::size_t resets_done() const { return resets_.load(); }
  // Forwards everything again, at once (no drop, no delay, no reset armed).
  void heal() {
    black_hole(false);
    drop_replies(false);
    drop_requests(false);
    delay_replies(std::chrono::milliseconds(0));
    reset_armed_.store(false);
  }
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
    pipe(tcp_proxy& p, tcp::socket c)
        : proxy(p), client(std::move(c)), server(p.io_), timer(p.io_), up_wait(p.io_), down_wait(p.io_) {}
    struct chunk {
      std::chrono::steady_clock::time_point due;
      std::string bytes;
      bool cut = false;  // forward half of it, then reset the connection
    };
    tcp_proxy& proxy;
    tcp::socket client;
    tcp::socket server;
    boost::asio::steady_timer timer;               // the next held chunk's time
    boost::asio::steady_timer up_wait, down_wait;  // while black-holed
    std::deque<chunk> held;                        // replies read from the server, not yet written to the client
    std::array<char, 16384> up{}, down{};

    void start() {
      server.async_connect({boost::asio::ip::make_address("127.0.0.1"), proxy.server_port_},
                           [self = shared_from_this()](boost::system::error_code ec) {
                             if (ec) return self->close();
                             self->forward_up();
                             self->forward_down();
                           });
    }
    // Each direction reads a chunk, then forwards it once the proxy is not black-holed, then reads the next.
    void forward_up() {
      client.async_read_some(boost::asio::buffer(up), [self = shared_from_this()](auto ec, std::size_t n) {
        if (ec) return self->close();
        if (self->proxy.drop_up_.load()) {
          self->proxy.dropped_.fetch_add(n);
          return self->forward_up();
        }
        self->when_flowing(self->up_wait, [self, n] {
          boost::asio::async_write(self->server, boost::asio::buffer(self->up, n), [self](auto wec, std::size_t) {
            if (wec) return self->close();
            self->forward_up();
          });
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
        self->when_flowing(self->down_wait, [self, n] {
          // A chunk to cut goes through the queue too: what was read before it reaches the client first.
          const bool cut = self->proxy.reset_armed_.exchange(false);
          const auto delay = std::chrono::nanoseconds(self->proxy.delay_ns_.load());
          self->held.push_back({std::chrono::steady_clock::now() + delay, std::string(self->down.data(), n), cut});
          if (self->held.size() == 1) self->write_held();
          if (!cut) self->forward_down();
        });
      });
    }
    // Calls `then` now, or once the proxy is no longer black-holed (checked every 5 ms) unless the pipe closes.
    template <class F>
    void when_flowing(boost::asio::steady_timer& t, F then) {
      if (!proxy.paused_.load()) return then();
      t.expires_after(std::chrono::milliseconds(5));
      t.async_wait([self = shared_from_this(), &t, then](boost::system::error_code ec) {
        if (ec || !self->client.is_open()) return;
        self->when_flowing(t, then);
      });
    }
    // Writes the held chunks in order, each once its time has come (and the proxy is not black-holed); a chunk to cut
    // is written half, and then the client's connection is reset (SO_LINGER 0: RST).
    void write_held() {
      timer.expires_at(held.front().due);
      timer.async_wait([self = shared_from_this()](boost::system::error_code) {
        if (!self->client.is_open()) return;
        self->when_flowing(self->timer, [self] {
          chunk& c = self->held.front();
          const std::size_t n = c.cut ? c.bytes.size() / 2 : c.bytes.size();
          boost::asio::async_write(self->client, boost::asio::buffer(c.bytes.data(), n), [self](auto wec, std::size_t) {
            if (wec) return self->close();
            if (self->held.front().cut) return self->reset();
            self->proxy.black_hole_if_triggered(self->held.front().bytes);
            self->held.pop_front();
            if (!self->held.empty()) self->write_held();
          });
        });
      });
    }
    void reset() {
      boost::system::error_code ignored;
      client.set_option(boost::asio::socket_base::linger(true, 0), ignored);
      proxy.resets_.fetch_add(1);  // before the client can see the reset
      close();
    }
    void close() {
      boost::system::error_code ignored;
      client.close(ignored);
      server.close(ignored);
      timer.cancel();
      up_wait.cancel();
      down_wait.cancel();
    }
  };

  void black_hole_if_triggered(const std::string& forwarded) {
    const std::lock_guard lock(trigger_mutex_);
    if (trigger_.empty() || forwarded.find(trigger_) == std::string::npos) return;
    trigger_.clear();
    paused_.store(true);
  }

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      auto p = std::make_shared<pipe>(*this, std::move(s));
      pipes_.push_back(p);
      p->start();
      accept();
    });
  }

  std::mutex trigger_mutex_;
  std::string trigger_;  // black_hole_after's text (empty: none)
  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  unsigned short server_port_;
  std::atomic<bool> drop_{false};
  std::atomic<bool> drop_up_{false};
  std::atomic<std::size_t> dropped_{0};
  std::atomic<std::int64_t> delay_ns_{0};
  std::atomic<bool> reset_armed_{false};
  std::atomic<bool> paused_{false};
  std::atomic<std::size_t> resets_{0};
  std::vector<std::weak_ptr<pipe>> pipes_;  // touched on the proxy's thread only
  std::thread thread_;
};

}  // namespace admit::redis::testing
