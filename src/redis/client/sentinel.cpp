// Redis Sentinel for admit::redis::connection: the discovery of the master (one coroutine on the connection's strand
// asking each sentinel in turn, each exchange raced against a timer), the ROLE check's verdict, the redis+sentinel://
// URL and the validation of sentinel_options. sentinel.hpp says what users see; sentinel_discovery.hpp is the
// connection's side.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "admit/detail/host_port.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/reply.hpp"
#include "sentinel_discovery.hpp"

namespace admit::redis::detail {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
constexpr auto as_tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// What one sentinel said.
struct answer {
  // failed: no answer (refused, timed out, ...), which may pass; refused: it answered, with an error to AUTH (a wrong
  // sentinel password) or to the question (a node that is no sentinel), which waiting does not fix.
  enum class kind { address, unknown, failed, refused };
  kind what = kind::failed;
  std::string host;
  std::uint16_t port = 0;
  std::string why;    // failed, refused: in words
  bool auth = false;  // refused for its credentials: AUTH's error, or NOAUTH / WRONGPASS / NOPERM to the question
};

answer failed(std::string why) { return answer{answer::kind::failed, {}, 0, std::move(why)}; }
answer refused(std::string why, bool auth) { return answer{answer::kind::refused, {}, 0, std::move(why), auth}; }

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

std::string text_of(const redisReply* r) {
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR) {
    return std::string(r->str, r->len);
  }
  return "a reply of type " + std::to_string(r->type);
}

// The last reply of the exchange: SENTINEL get-master-addr-by-name's.
answer interpret(const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) return answer{answer::kind::unknown, {}, 0, {}};
  if (r->type == REDIS_REPLY_ERROR) {
    const std::string text = text_of(r);
    return refused("SENTINEL get-master-addr-by-name: " + text, kind_of_error(text) == error_kind::credentials);
  }
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
      r->element[1]->type == REDIS_REPLY_STRING) {
    const std::string_view port(r->element[1]->str, r->element[1]->len);
    unsigned value = 0;
    const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec == std::errc{} && p == port.data() + port.size() && value > 0 && value <= 65535 && r->element[0]->len > 0) {
      return answer{answer::kind::address,
                    std::string(r->element[0]->str, r->element[0]->len),
                    static_cast<std::uint16_t>(value),
                    {}};
    }
  }
  return failed("unexpected reply to SENTINEL get-master-addr-by-name");
}

// One exchange with one sentinel: resolve, connect, write `payload` (AUTH when `with_auth`, then the question), read
// the replies. Never throws for I/O: a failure is an answer.
asio::awaitable<answer> ask(sentinel_endpoint ep, std::string payload, bool with_auth) {
  const auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  auto [rec, results] = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), as_tuple_awaitable);
  if (rec) co_return failed("resolve: " + rec.message());
  tcp::socket socket(ex);
  auto [cec, unused_endpoint] = co_await asio::async_connect(socket, results, as_tuple_awaitable);
  if (cec) {
    co_return failed(cec == asio::error::connection_refused ? std::string("connection refused")
                                                            : "connect: " + cec.message());
  }
  auto [wec, unused_written] = co_await asio::async_write(socket, asio::buffer(payload), as_tuple_awaitable);
  if (wec) co_return failed("write: " + wec.message());
  const std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader(redisReaderCreate(), &redisReaderFree);
  if (!reader) throw std::bad_alloc();
  const std::size_t expected = with_auth ? 2 : 1;
  std::vector<reply_ptr> replies;
  std::array<char, 4096> buffer{};
  while (replies.size() < expected) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK)
      co_return failed(std::string("protocol: ") + reader->errstr);
    if (raw != nullptr) {
      replies.emplace_back(static_cast<redisReply*>(raw));
      continue;
    }
    auto [rerr, n] = co_await socket.async_read_some(asio::buffer(buffer), as_tuple_awaitable);
    if (rerr) {
      co_return failed(rerr == asio::error::eof ? std::string("closed the connection") : "read: " + rerr.message());
    }
    if (redisReaderFeed(reader.get(), buffer.data(), n) != REDIS_OK) {
      co_return failed(std::string("protocol: ") + reader->errstr);
    }
  }
  if (with_auth && replies.front()->type == REDIS_REPLY_ERROR)
    co_return refused("AUTH: " + text_of(replies.front().get()), true);
  co_return interpret(replies.back().get());
}

// ask() bounded by `timeout`.
asio::awaitable<answer> ask_within(sentinel_endpoint ep, std::string payload, bool with_auth,
                                   std::chrono::nanoseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(timeout);
  auto first = co_await (ask(std::move(ep), std::move(payload), with_auth) || timer.async_wait(as_tuple_awaitable));
  if (first.index() == 0) co_return std::get<0>(std::move(first));
  co_return failed("timed out");
}

struct outcome {
  discovered_master master;
  std::size_t winner = 0;  // the index (in the order asked) of the sentinel that gave the address
};

asio::awaitable<outcome> discover(std::vector<sentinel_endpoint> order, sentinel_options options,
                                  std::chrono::nanoseconds timeout) {
  command question{"SENTINEL", "get-master-addr-by-name", options.master_name};
  std::string payload;
  const bool with_auth = !options.password.empty();
  if (with_auth) {
    command auth{"AUTH"};
    if (!options.user.empty()) auth.arg(options.user);
    auth.arg(options.password);
    append_command(payload, auth);
  }
  append_command(payload, question);
  std::string tried;
  std::size_t unknown = 0, refused_auth = 0, refused_other = 0;  // sentinels that answered, without an address
  for (std::size_t i = 0; i < order.size(); ++i) {
    answer a = co_await ask_within(order[i], payload, with_auth, timeout);
    const std::string where = admit::detail::host_port(order[i].host, order[i].port);
    if (a.what == answer::kind::address) {
      outcome o;
      o.master.host = std::move(a.host);
      o.master.port = a.port;
      o.master.words = where;  // the sentinel that named it
      o.winner = i;
      co_return o;
    }
    if (a.what == answer::kind::unknown) ++unknown;
    if (a.what == answer::kind::refused) ++(a.auth ? refused_auth : refused_other);
    tried += (tried.empty() ? "" : "; ") + where + ": " +
             (a.what == answer::kind::unknown ? std::string("does not know it") : a.why);
  }
  outcome o;
  // Every sentinel answered, and none can name the master: what waiting does not fix, unlike silence (a sentinel that
  // did not answer may know the name once it does).
  const std::size_t answered = unknown + refused_auth + refused_other;
  const bool all_answered = !order.empty() && answered == order.size();
  if (all_answered && refused_auth == order.size()) {
    o.master.error = make_error_code(errc::auth_failed);
    o.master.words =
        "Sentinel: every sentinel refused the credentials for master '" + options.master_name + "' (" + tried + ")";
  } else if (all_answered) {
    o.master.error = make_error_code(errc::unknown_master);
    o.master.words = "Sentinel: no sentinel knows master '" + options.master_name + "' (" + tried + ")";
  } else {
    o.master.error = make_error_code(errc::no_sentinel);
    o.master.words = (answered == 0 ? "Sentinel: no sentinel answered for master '"
                                    : "Sentinel: no sentinel that answered knows master '") +
                     options.master_name + "' (" + tried + ")";
  }
  co_return o;
}

}  // namespace

sentinel_discovery::sentinel_discovery(boost::asio::any_io_executor strand, const connection_options& options)
    : strand_(std::move(strand)),
      options_(options.sentinel),
      timeout_(options.connect_timeout),
      order_(options.sentinel.sentinels) {}

void sentinel_discovery::async_discover(std::function<void(discovered_master)> done) {
  cancel();
  const std::uint64_t run = run_;
  auto signal = std::make_shared<asio::cancellation_signal>();
  cancel_ = signal;
  auto complete = [self = shared_from_this(), run, done = std::move(done), signal](std::exception_ptr e, outcome o) {
    if (run != self->run_) return;  // cancelled
    self->cancel_.reset();
    if (e) {
      o = outcome{};
      o.master.error = make_error_code(errc::no_sentinel);
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        o.master.words = std::string("Sentinel: discovery failed: ") + x.what();
      } catch (...) {
        o.master.words = "Sentinel: discovery failed";
      }
    } else if (!o.master.error) {
      // The sentinel that answered is asked first next time.
      const auto winner = self->order_.begin() + static_cast<std::ptrdiff_t>(o.winner);
      std::rotate(self->order_.begin(), winner, winner + 1);
      self->named_ = admit::detail::host_port(o.master.host, o.master.port) + ", named master '" +
                     self->options_.master_name + "' by sentinel " + o.master.words;
      o.master.words.clear();
    }
    done(std::move(o.master));
  };
  asio::co_spawn(strand_, discover(order_, options_, timeout_),
                 asio::bind_cancellation_slot(signal->slot(), std::move(complete)));
}

void sentinel_discovery::cancel() {
  ++run_;
  if (cancel_) {
    cancel_->emit(asio::cancellation_type::terminal);
    cancel_.reset();
  }
}

std::optional<std::string> sentinel_discovery::check_role(const reply& role) const {
  if (role.is_array() && !role.elements().empty() && role.elements().front().str() == "master") return std::nullopt;
  std::string said;
  if (role.is_error()) {
    said = "an error: " + role.str();
  } else if (role.is_array() && !role.elements().empty()) {
    said = "'" + role.elements().front().str() + "'";
  } else {
    said = "an unexpected reply";
  }
  return "Sentinel: " + named_ + " is not a master: ROLE answered " + said;
}

// ---- validation (the redis+sentinel:// URL is parsed in options.cpp with the other schemes) ----
void validate_sentinel(const connection_options& o) {
  const sentinel_options& s = o.sentinel;
  if (s.master_name.empty()) return;
  if (s.sentinels.empty()) {
    throw std::invalid_argument("redis connection_options: sentinel.master_name '" + s.master_name +
                                "' with no sentinels (sentinel.sentinels is empty)");
  }
  for (const auto& ep : s.sentinels) {
    if (ep.host.empty()) throw std::invalid_argument("redis connection_options: a sentinel with an empty host");
    if (ep.port == 0) {
      throw std::invalid_argument("redis connection_options: sentinel " + ep.host + " with port 0 (want 1-65535)");
    }
  }
}

}  // namespace admit::redis::detail
