// admit::redis::semaphore — the client side of src/redis/lua/semaphore.lua: identities, the waiting loop (wake-ups
// through a blocked connection, polling as the backstop), leases and their renewal. See semaphore.hpp.
#include "admit/redis/semaphore.hpp"

#include <unistd.h>

#include <admit_redis_lua/semaphore_lua.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <utility>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/limiter_result.hpp"
#include "hash_tag.hpp"

namespace admit::redis {

namespace {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

const script& semaphore_script() {
  static const script s{std::string(detail::lua::semaphore)};
  return s;
}

// The script's reply statuses (semaphore.lua).
enum status : std::int64_t { granted = 0, queued = 1, unavailable = 2, full = 3, too_large = 4, unknown = 5, left = 6 };

class error_reply_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "admit.redis.semaphore"; }
  std::string message(int) const override { return "error reply from the semaphore's script"; }
};

// 128 random bits as 32 hex digits: an identity per acquisition (and per semaphore object, for its wake list). The
// generator is reseeded in a forked child (its copy of the parent's state would repeat the parent's next identities:
// two holders under one identity).
std::string random_id() {
  struct generator {
    ::pid_t pid = -1;
    std::mt19937_64 rng;
  };
  thread_local generator g;
  if (g.pid != ::getpid()) {
    g.pid = ::getpid();
    std::random_device rd;
    std::seed_seq seed{rd(),
                       rd(),
                       rd(),
                       rd(),
                       static_cast<unsigned>(g.pid),
                       static_cast<unsigned>(steady::now().time_since_epoch().count())};
    g.rng.seed(seed);
  }
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(g.rng()),
                static_cast<unsigned long long>(g.rng()));
  return out;
}

// "{name}:", the prefix of every key of semaphore `name`.
std::string key_prefix(const std::string& name) { return detail::hash_tag(name).append(":"); }

// The six keys of semaphore.lua, in its KEYS order.
std::vector<std::string> semaphore_keys(const std::string& name) {
  std::vector<std::string> keys;
  for (const char* k : {"meta", "holders", "leases", "queue", "waiters", "expiry"})
    keys.push_back(key_prefix(name) + k);
  return keys;
}

std::int64_t to_us(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// A reply {status, ...} whose first elements are integers; nullopt for any other shape.
std::optional<std::vector<std::int64_t>> integers(const reply& r, std::size_t count) {
  if (!r.is_array() || r.elements().size() < count) return std::nullopt;
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i < count; ++i) {
    if (!r.elements()[i].is_integer()) return std::nullopt;
    v.push_back(r.elements()[i].integer());
  }
  return v;
}

}  // namespace

const std::error_category& semaphore_error_category() noexcept {
  static const error_reply_category c;
  return c;
}

namespace detail {

// The state one semaphore object, its waits and its leases share.
class semaphore_core : public std::enable_shared_from_this<semaphore_core> {
 public:
  // What a wake-up says: the grant as a granted reply {0, n, token, expiry_us, now_us}, or empty when it could not be
  // read (the waiter then asks with a poll).
  using grant_reply = std::vector<std::int64_t>;
  // `waker`: a client of the same server(s) of its own, for the blocking BLMPOP; `close_waker` closes it.
  semaphore_core(client& conn, std::unique_ptr<client> waker, std::function<void()> close_waker, std::string name,
                 std::int64_t capacity, semaphore_options options)
      : conn_(conn),
        link_(conn),
        waker_(std::move(waker)),
        close_waker_(std::move(close_waker)),
        waker_timer_(conn.get_executor()),
        name_(std::move(name)),
        capacity_(std::to_string(capacity)),
        options_(std::move(options)) {
    keys_ = semaphore_keys(name_);
    wake_key_ = key_prefix(name_) + "wake:" + random_id();
    if (options_.waiter_ttl.count() == 0) options_.waiter_ttl = 3 * options_.poll_interval + options_.timeout;
  }

  // The script call `op` with its own arguments, blocking until `deadline`.
  result call(std::optional<steady::time_point> deadline, const char* op, std::initializer_list<std::string> args) {
    return evalsha_until(conn_, deadline, semaphore_script(), make(op, args));
  }
  // The same, completing `handler(error_code, reply)` through its executor (the connection's by default).
  template <class Handler>
  void async_call(const char* op, std::initializer_list<std::string> args, Handler&& handler) {
    async_command(make(op, args), call_deadline({}), std::forward<Handler>(handler));
  }
  template <class Handler>
  void async_command(command cmd, std::optional<steady::time_point> deadline, Handler&& handler) {
    asio::async_compose<Handler, void(boost::system::error_code, reply)>(
        evalsha_op{&link_, &semaphore_script(), std::move(cmd), deadline}, handler, link_.get_executor());
  }

  std::optional<steady::time_point> call_deadline(std::optional<steady::time_point> limit) const {
    const auto d = steady::now() + options_.timeout;
    return limit ? std::min(d, *limit) : d;
  }

  // n permits if free now (one call).
  semaphore_result try_acquire(std::int64_t n);
  // Waits in the queue until granted, `deadline` or `stop` (async_acquire_op, blocking on its completion).
  semaphore_result acquire(std::int64_t n, std::optional<steady::time_point> deadline, const std::stop_token& stop);
  // A lease from a granted reply {0, n, token, expiry_us, now_us} to a call sent at `sent` (local time).
  semaphore_result make_lease(const std::string& id, const std::vector<std::int64_t>& v, steady::time_point sent);
  void abandon(const std::string& id);
  void release_async(const std::string& id);
  void shutdown() {
    closing_ = true;
    close_waker_();
  }

  client& conn_;                   // for the blocking calls of the semaphore's and its leases' users
  client_link link_;               // for asynchronous calls, whose handlers may run after the client's destruction
  std::unique_ptr<client> waker_;  // blocked in BLMPOP on wake_key_ while this process has waiters
  std::function<void()> close_waker_;
  asio::steady_timer waker_timer_;  // the pause after a failed BLMPOP
  std::string name_;
  std::string capacity_;  // the capacity to start with (ARGV[2])
  semaphore_options options_;
  std::vector<std::string> keys_;
  std::string wake_key_;
  std::atomic<bool> closing_{false};

 private:
  command make(const char* op, std::initializer_list<std::string> args) const {
    command c{"EVALSHA", semaphore_script().sha1(), "6"};
    for (const auto& k : keys_) c.arg(k);
    c.arg(op).arg(capacity_);
    for (const auto& a : args) c.arg(a);
    return c;
  }

  void waker_loop();

  std::mutex mutex_;
  std::unordered_map<std::string, std::function<void(const grant_reply&)>> waiters_;  // guarded by mutex_
  bool waker_running_ = false;                                                        // guarded by mutex_

 public:
  // Waiters of this process, by id: the wake-up loop calls `on_wake` (under mutex_) when the id comes out of the
  // wake list.
  void register_waiter(const std::string& id, std::function<void(const grant_reply&)> on_wake);
  void unregister_waiter(const std::string& id);

  // What an acquire call's reply means: a result, or nullopt when the request is queued. A failed call leaves the
  // request behind on the server (queued or granted): it is abandoned.
  std::optional<semaphore_result> judge(const std::string& id, const boost::system::error_code& ec, const reply& r,
                                        steady::time_point sent);
  command acquire_command(const std::string& id, std::int64_t n, bool wait) const;
  command poll_command(const std::string& id, const std::string& waiter_ttl) const {
    return make("poll", {id, waiter_ttl});
  }
};

// One lease's shared state: what the lease object, its renewal timer and a release in flight share.
struct lease_core : std::enable_shared_from_this<lease_core> {
  lease_core(std::shared_ptr<semaphore_core> s, std::string i, std::int64_t count, std::int64_t fence,
             std::int64_t expiry_us, steady::time_point local)
      : sem(std::move(s)),
        id(std::move(i)),
        n(count),
        token(fence),
        expires_us(expiry_us),
        local_expiry(local.time_since_epoch().count()),
        strand(asio::make_strand(sem->link_.get_executor())),
        timer(strand) {}

  std::shared_ptr<semaphore_core> sem;
  std::string id;
  std::int64_t n;
  std::int64_t token;
  std::atomic<std::int64_t> expires_us;
  std::atomic<steady::rep> local_expiry;  // conservative local estimate of the expiry (steady clock ticks)
  std::atomic<lease_state> state{lease_state::held};
  asio::strand<asio::any_io_executor> strand;
  asio::steady_timer timer;  // renewal; used on `strand` only

  void mark_lost() {
    lease_state expected = lease_state::held;
    if (state.compare_exchange_strong(expected, lease_state::lost) && sem->options_.on_lease_lost) {
      sem->options_.on_lease_lost(id, token);
    }
  }
  // Called after a successful renewal sent at `sent` (local time): the lease lives at least lease_ttl from then.
  void renewed(std::int64_t expiry_us, steady::time_point sent) {
    expires_us.store(expiry_us, std::memory_order_relaxed);
    local_expiry.store((sent + sem->options_.lease_ttl).time_since_epoch().count(), std::memory_order_relaxed);
  }

  // The next renewal in `delay` (default: lease_ttl / 3).
  void schedule_renewal(std::optional<steady::duration> delay = std::nullopt) {
    asio::post(strand, [self = shared_from_this(), delay] {
      self->timer.expires_after(
          delay ? *delay : std::max<steady::duration>(self->sem->options_.lease_ttl / 3, std::chrono::milliseconds(1)));
      self->timer.async_wait([self](boost::system::error_code ec) {
        if (ec || self->state.load() != lease_state::held) return;
        const auto sent = steady::now();
        self->sem->async_call("renew", {self->id, std::to_string(to_us(self->sem->options_.lease_ttl))},
                              [self, sent](boost::system::error_code e, reply r) {
                                if (self->state.load() != lease_state::held) return;
                                const auto v = e ? std::nullopt : integers(r, 2);
                                if (v && (*v)[0] == granted) {
                                  self->renewed((*v)[1], sent);
                                } else if (v && (*v)[0] == unknown) {
                                  return self->mark_lost();
                                } else if (steady::now().time_since_epoch().count() >= self->local_expiry.load()) {
                                  return self->mark_lost();  // renewals failed until the lease must have expired
                                }
                                self->schedule_renewal();
                              });
      });
    });
  }
  void stop_renewal() {
    asio::post(strand, [self = shared_from_this()] { self->timer.cancel(); });
  }
};

semaphore_result semaphore_core::make_lease(const std::string& id, const std::vector<std::int64_t>& v,
                                            steady::time_point sent) {
  // The lease lives (expiry - now) of the server's time after the reply was made, which is after `sent`: counting
  // from `sent` is a conservative local estimate of its expiry.
  const auto left = std::chrono::microseconds(std::max<std::int64_t>(0, v[3] - v[4]));
  auto core = std::make_shared<lease_core>(shared_from_this(), id, v[1], v[2], v[3], sent + left);
  // A grant found late (a lost wake-up, a slow poll) has less than lease_ttl left: the first renewal comes in time.
  if (options_.auto_renew) {
    core->schedule_renewal(std::min<steady::duration>(
        std::max<steady::duration>(options_.lease_ttl / 3, std::chrono::milliseconds(1)), left / 2));
  }
  return lease(std::move(core));
}

void semaphore_core::release_async(const std::string& id) {
  async_call("release", {id}, [self = shared_from_this()](boost::system::error_code, reply) {});
}

// Leaves the queue without waiting for the answer; a grant that came first is released at once.
void semaphore_core::abandon(const std::string& id) {
  unregister_waiter(id);
  async_call("cancel", {id}, [self = shared_from_this(), id](boost::system::error_code ec, reply r) {
    if (ec) return;  // unknown: the waiter expires by itself, a grant with its lease
    if (const auto v = integers(r, 1); v && (*v)[0] == granted) self->release_async(id);
  });
}

void semaphore_core::register_waiter(const std::string& id, std::function<void(const grant_reply&)> on_wake) {
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    waiters_[id] = std::move(on_wake);
    if (!waker_running_) start = waker_running_ = true;
  }
  if (start) asio::post(waker_->get_executor(), [self = shared_from_this()] { self->waker_loop(); });
}

void semaphore_core::unregister_waiter(const std::string& id) {
  std::lock_guard lock(mutex_);
  waiters_.erase(id);
}

// While this process has waiters: BLMPOP on its wake list (at most poll_interval at a time), waking the waiter whose
// id comes out. Runs on the connection's executor, one call at a time.
void semaphore_core::waker_loop() {
  {
    std::lock_guard lock(mutex_);
    if (waiters_.empty() || closing_) {
      waker_running_ = false;
      return;
    }
  }
  const auto wait = std::max<std::chrono::milliseconds>(options_.poll_interval, std::chrono::milliseconds(1));
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", std::chrono::duration<double>(wait).count());
  // BLMPOP ... RIGHT COUNT: every grant waiting on the list (up to 128), oldest first, in one reply — one wake-up per
  // round trip would fall behind the grants of a busy semaphore.
  waker_->async_execute_command(
      steady::now() + wait + options_.timeout, command{"BLMPOP", seconds, "1", wake_key_, "RIGHT", "COUNT", "128"},
      [self = shared_from_this()](boost::system::error_code ec, reply r) {
        // {key, {"id:n:token:expiry:now", ...}} (semaphore.lua), or nil after the timeout
        if (!ec && r.is_array() && r.elements().size() == 2 && r.elements()[1].is_array()) {
          std::lock_guard lock(self->mutex_);
          for (const reply& e : r.elements()[1].elements()) {
            if (!e.is_string()) continue;
            const std::string& text = e.str();
            const std::string id = text.substr(0, text.find(':'));
            grant_reply grant{granted};
            for (std::size_t at = text.find(':'); at != std::string::npos && grant.size() < 5;
                 at = text.find(':', at + 1)) {
              grant.push_back(std::strtoll(text.c_str() + at + 1, nullptr, 10));
            }
            if (grant.size() != 5) grant.clear();
            if (auto it = self->waiters_.find(id); it != self->waiters_.end()) it->second(grant);
          }
        }
        if (ec && !self->closing_) {
          // Redis is away: the waiters poll meanwhile; try again after a pause instead of spinning.
          self->waker_timer_.expires_after(self->options_.poll_interval);
          self->waker_timer_.async_wait([self](boost::system::error_code) { self->waker_loop(); });
          return;
        }
        self->waker_loop();
      });
}

command semaphore_core::acquire_command(const std::string& id, std::int64_t n, bool wait) const {
  const std::size_t max_waiters = std::min<std::size_t>(options_.max_waiters, std::numeric_limits<std::int64_t>::max());
  return make("acquire", {id, std::to_string(n), std::to_string(to_us(options_.lease_ttl)), wait ? "1" : "0",
                          std::to_string(max_waiters), std::to_string(to_us(options_.waiter_ttl)), wake_key_});
}

std::optional<semaphore_result> semaphore_core::judge(const std::string& id, const boost::system::error_code& ec,
                                                      const reply& r, steady::time_point sent) {
  if (ec) {
    abandon(id);  // it may have been queued or granted before the call failed
    return semaphore_result(std::error_code(ec));
  }
  const auto v = integers(r, 3);
  if (r.is_error() || !v) return semaphore_result(std::error_code(1, semaphore_error_category()));
  switch ((*v)[0]) {
    case granted:
      if (const auto l = integers(r, 5)) return make_lease(id, *l, sent);
      break;
    case queued:
      return std::nullopt;
    case unavailable:
      return semaphore_result(std::make_error_code(std::errc::resource_unavailable_try_again));
    case full:
      return semaphore_result(admit::errc::queue_full);
    case too_large:
      return semaphore_result(admit::errc::exceeds_capacity);
    default:
      break;
  }
  return semaphore_result(std::error_code(1, semaphore_error_category()));
}

semaphore_result semaphore_core::try_acquire(std::int64_t n) {
  const std::string id = random_id();
  const steady::time_point sent = steady::now();
  const result r = evalsha_until(conn_, call_deadline({}), semaphore_script(), acquire_command(id, n, false));
  if (auto done = judge(id, r.error, r.value, sent)) return std::move(*done);
  abandon(id);  // queued although told not to wait: a script out of step with this client
  return semaphore_result(std::error_code(1, semaphore_error_category()));
}

// A waiting acquisition (async_acquire, and the blocking waits through a future) as a state machine on a strand — the
// acquire call, then polls on a timer or a wake-up, until granted, the deadline or a cancellation. Exactly one
// completion.
class async_acquire_op : public std::enable_shared_from_this<async_acquire_op> {
 public:
  async_acquire_op(std::shared_ptr<semaphore_core> core, std::int64_t n, std::optional<steady::time_point> deadline,
                   std::shared_ptr<acquire_completion> completion)
      : core_(std::move(core)),
        n_(n),
        deadline_(deadline),
        completion_(std::move(completion)),
        strand_(asio::make_strand(core_->link_.get_executor())),
        poll_timer_(strand_),
        deadline_timer_(strand_),
        id_(random_id()),
        waiter_ttl_(std::to_string(to_us(core_->options_.waiter_ttl))) {}

  void start() {
    asio::post(strand_, [self = shared_from_this()] {
      if (self->done_) return;  // cancelled before it started
      if (self->deadline_) {
        self->deadline_timer_.expires_at(*self->deadline_);
        self->deadline_timer_.async_wait([self](boost::system::error_code ec) {
          if (!ec) self->give_up(admit::errc::timeout);
        });
      }
      self->enqueue();
    });
  }
  // Gives up with `why` (errc::cancelled, or errc::timeout when a blocking waiter's own deadline came first).
  void cancel(admit::errc why = admit::errc::cancelled) {
    asio::post(strand_, [self = shared_from_this(), why] { self->give_up(why); });
  }

 private:
  void enqueue() {
    if (!registered_) {  // before the call: a grant's wake-up can come before the reply "queued"
      registered_ = true;
      core_->register_waiter(id_, [weak = weak_from_this(), id = id_](const semaphore_core::grant_reply& grant) {
        auto op = weak.lock();
        if (!op) return;
        asio::post(op->strand_, [op, grant, id] {
          if (id != op->id_) return;  // for an identity given up by a requeue meanwhile: nobody's
          const bool fresh =
              !grant.empty() && op->sent_ + std::chrono::microseconds(grant[3] - grant[4]) > steady::now();
          if (!fresh || op->done_) return op->poll();  // unreadable or too late: ask
          op->finish(op->core_->make_lease(op->id_, grant, op->sent_));
        });
      });
    }
    sent_ = steady::now();
    core_->async_command(
        core_->acquire_command(id_, n_, true), core_->call_deadline(deadline_),
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, reply r) {
          if (self->gave_up_) {
            // Given up meanwhile. The cancel was sent after this call, but may have run first when this call had to
            // load the script and retry: if it queued or granted after all, leave again.
            const auto v = ec ? std::nullopt : integers(r, 1);
            if (v && ((*v)[0] == granted || (*v)[0] == queued)) self->core_->abandon(self->id_);
            return;
          }
          if (self->done_) return;  // granted by a wake-up that came before this reply ("queued")
          if (ec && self->deadline_ && steady::now() >= *self->deadline_) {
            return self->give_up(admit::errc::timeout);  // the call ran out with the wait: the wait's own error
          }
          if (auto result = self->core_->judge(self->id_, ec, r, self->sent_)) {
            return self->finish(std::move(*result));
          }
          self->arm();
        }));
  }
  // Queues again under a new identity (a late wake-up for the old one is then nobody's).
  void requeue() {
    core_->unregister_waiter(id_);
    id_ = random_id();
    registered_ = false;
    enqueue();
  }
  void arm() {
    poll_timer_.expires_after(core_->options_.poll_interval);
    poll_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->poll();
    });
  }
  void poll() {
    if (done_ || polling_) return;
    polling_ = true;
    sent_ = steady::now();
    core_->async_command(
        core_->poll_command(id_, waiter_ttl_), core_->call_deadline(deadline_),
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, reply r) {
          self->polling_ = false;
          if (self->done_) return;
          if (ec == errc::closed) return self->finish(semaphore_result(std::error_code(ec)));  // nobody will answer
          if (ec) return self->arm();  // Redis is away: ask again later, until the deadline
          const auto v = integers(r, 1);
          if (v && (*v)[0] == queued) return self->arm();
          if (v && (*v)[0] == unknown) return self->requeue();  // our place expired: queue again
          const auto l = integers(r, 5);
          if (v && (*v)[0] == granted && l) {
            return self->finish(self->core_->make_lease(self->id_, *l, self->sent_));
          }
          self->core_->abandon(self->id_);
          self->finish(semaphore_result(std::error_code(1, semaphore_error_category())));
        }));
  }
  void finish(semaphore_result r) {
    if (done_) return;
    done_ = true;
    stop_timers();
    core_->unregister_waiter(id_);
    if (r) {
      completion_->complete({}, std::move(r.value()));
    } else {
      completion_->complete(r.error(), lease());
    }
  }
  void give_up(admit::errc e) {
    if (done_) return;
    done_ = gave_up_ = true;
    stop_timers();
    core_->abandon(id_);
    completion_->complete(admit::make_error_code(e), lease());
  }
  void stop_timers() {
    poll_timer_.cancel();
    deadline_timer_.cancel();
  }

  std::shared_ptr<semaphore_core> core_;
  std::int64_t n_;
  std::optional<steady::time_point> deadline_;
  std::shared_ptr<acquire_completion> completion_;
  asio::strand<asio::any_io_executor> strand_;
  asio::steady_timer poll_timer_;
  asio::steady_timer deadline_timer_;
  std::string id_;
  std::string waiter_ttl_;
  steady::time_point sent_;
  // Touched on strand_ only.
  bool done_ = false;     // completed
  bool gave_up_ = false;  // completed by the deadline or a cancellation
  bool polling_ = false;
  bool registered_ = false;
};

// The completion of a blocking wait. The waiting thread ends the wait itself at its deadline or stop, whether or not
// the executor runs; the first outcome claimed is the result. A lease that loses the claim is released (~lease).
class blocking_completion final : public acquire_completion {
 public:
  std::future<semaphore_result> get_future() { return promise_.get_future(); }
  bool claim(semaphore_result r) {
    if (claimed_.exchange(true)) return false;
    promise_.set_value(std::move(r));
    return true;
  }
  void complete(std::error_code ec, lease l) override {
    claim(ec ? semaphore_result(ec) : semaphore_result(std::move(l)));
  }

 private:
  std::atomic<bool> claimed_{false};
  std::promise<semaphore_result> promise_;
};

semaphore_result semaphore_core::acquire(std::int64_t n, std::optional<steady::time_point> deadline,
                                         const std::stop_token& stop) {
  if (stop.stop_requested()) return semaphore_result(admit::errc::cancelled);  // nothing sent
  auto completion = std::make_shared<blocking_completion>();
  auto done = completion->get_future();
  auto op = std::make_shared<async_acquire_op>(shared_from_this(), n, deadline, completion);
  op->start();
  // The stop and the deadline end the wait here and now, even with a call in flight; the operation then leaves the
  // queue (or releases a grant that raced) on the executor.
  const std::stop_callback on_stop(stop, [&] {
    if (completion->claim(semaphore_result(admit::errc::cancelled))) op->cancel(admit::errc::cancelled);
  });
  if (deadline && done.wait_until(*deadline) == std::future_status::timeout &&
      completion->claim(semaphore_result(admit::errc::timeout))) {
    op->cancel(admit::errc::timeout);
  }
  return done.get();
}

std::shared_ptr<async_acquire_op> make_async_acquire(const std::shared_ptr<semaphore_core>& core, std::int64_t n,
                                                     std::optional<steady::time_point> deadline,
                                                     std::shared_ptr<acquire_completion> completion) {
  return std::make_shared<async_acquire_op>(core, n, deadline, std::move(completion));
}
void start(const std::shared_ptr<async_acquire_op>& op) { op->start(); }
void cancel(const std::shared_ptr<async_acquire_op>& op) { op->cancel(); }
asio::any_io_executor executor_of(const semaphore_core& core) noexcept { return core.link_.get_executor(); }

}  // namespace detail

// ---- lease ----

lease::lease() noexcept = default;
lease::lease(std::shared_ptr<detail::lease_core> core) noexcept : core_(std::move(core)) {}
lease::lease(lease&&) noexcept = default;
lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));  // released by its destructor
    core_ = std::move(other.core_);
  }
  return *this;
}
lease::~lease() {
  if (!core_) return;
  lease_state expected = lease_state::held;
  core_->stop_renewal();
  if (core_->state.compare_exchange_strong(expected, lease_state::released)) core_->sem->release_async(core_->id);
}

std::pair<lease::release_status, std::error_code> lease::release() {
  if (!core_) return {release_status::not_held, {}};
  core_->stop_renewal();
  const lease_state before = core_->state.exchange(lease_state::released);
  (void)before;  // a lease found lost is still asked for: Redis says whether it had it
  const result r = core_->sem->call(core_->sem->call_deadline({}), "release", {core_->id});
  if (r.error) return {release_status::failed, std::error_code(r.error)};
  const auto v = integers(r.value, 1);
  if (!v) return {release_status::failed, std::error_code(1, semaphore_error_category())};
  return {(*v)[0] == 0 ? release_status::released : release_status::not_held, {}};
}

std::pair<bool, std::error_code> lease::renew() {
  if (!core_ || core_->state.load() != lease_state::held) return {false, {}};
  const auto sent = std::chrono::steady_clock::now();
  const result r = core_->sem->call(core_->sem->call_deadline({}), "renew",
                                    {core_->id, std::to_string(to_us(core_->sem->options_.lease_ttl))});
  if (r.error) return {false, std::error_code(r.error)};
  const auto v = integers(r.value, 2);
  if (!v) return {false, std::error_code(1, semaphore_error_category())};
  if ((*v)[0] != 0) {
    core_->mark_lost();
    return {false, {}};
  }
  core_->renewed((*v)[1], sent);
  return {true, {}};
}

std::int64_t lease::count() const noexcept { return core_ ? core_->n : 0; }
std::int64_t lease::fencing_token() const noexcept { return core_ ? core_->token : 0; }
const std::string& lease::id() const noexcept {
  static const std::string none;
  return core_ ? core_->id : none;
}
lease_state lease::state() const noexcept { return core_ ? core_->state.load() : lease_state::released; }
std::chrono::microseconds lease::expires_at() const noexcept {
  return std::chrono::microseconds(core_ ? core_->expires_us.load() : 0);
}

// ---- semaphore ----

void check_semaphore_name(const std::string& name) { detail::check_tag_name("semaphore", name); }

namespace {

constexpr std::int64_t max_capacity = std::int64_t{1} << 50;  // exact in the script's doubles, with room

void check_capacity(std::int64_t capacity) {
  if (capacity < 0 || capacity > max_capacity) {
    throw std::invalid_argument("admit::redis::semaphore: capacity must be in [0, 2^50], got " +
                                std::to_string(capacity));
  }
}

std::pair<semaphore_snapshot, std::error_code> parse_snapshot(const result& r) {
  semaphore_snapshot s;
  if (r.error) return {s, std::error_code(r.error)};
  // An error reply keeps its text: LOADING, BUSY or MASTERDOWN may pass by waiting, WRONGTYPE will not.
  if (r.value.is_error()) {
    s.error_reply = r.value.str();
    return {s, make_error_code(errc::error_reply)};
  }
  const auto v = integers(r.value, 1);
  if (!v) return {s, std::error_code(1, semaphore_error_category())};
  if ((*v)[0] == 5) return {s, std::make_error_code(std::errc::no_such_file_or_directory)};
  const auto head = integers(r.value, 5);
  const auto& e = r.value.elements();
  if (!head || e.size() < 9 || !e[5].is_array() || !e[6].is_array()) {
    return {s, std::error_code(1, semaphore_error_category())};
  }
  s.capacity = (*head)[1];
  s.available = (*head)[2];
  s.last_fencing_token = (*head)[3];
  s.server_time = std::chrono::microseconds((*head)[4]);
  for (const reply& h : e[5].elements()) {
    const auto& f = h.elements();
    if (f.size() != 4) continue;
    s.holders.push_back(
        {f[0].str(), f[1].integer(), f[2].integer(), std::chrono::microseconds(f[3].integer() - (*head)[4])});
  }
  for (const reply& w : e[6].elements()) {
    const auto& f = w.elements();
    if (f.size() != 3) continue;
    s.queue.push_back({f[0].str(), f[1].integer(), std::chrono::microseconds(f[2].integer() - (*head)[4])});
  }
  s.holder_count = e[7].is_integer() ? e[7].integer() : 0;
  s.waiter_count = e[8].is_integer() ? e[8].integer() : 0;
  return {s, {}};
}

}  // namespace

namespace {

void check_options(const semaphore_options& options) {
  const auto positive = [](std::chrono::milliseconds d, const char* what) {
    if (d.count() < 1) {
      throw std::invalid_argument(std::string("admit::redis::semaphore: options.") + what +
                                  " must be at least 1 ms, got " + std::to_string(d.count()) + "ms");
    }
  };
  // At most 2^40 µs (~12.7 days): the script's microseconds stay exact and nothing overflows on the way there.
  const auto bounded = [](std::chrono::milliseconds d, const char* what) {
    if (d > std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::microseconds(std::int64_t{1} << 40))) {
      throw std::invalid_argument(std::string("admit::redis::semaphore: options.") + what +
                                  " must be at most 2^40 us (about 12.7 days), got " + std::to_string(d.count()) +
                                  "ms");
    }
  };
  positive(options.lease_ttl, "lease_ttl");
  positive(options.poll_interval, "poll_interval");
  positive(options.timeout, "timeout");
  bounded(options.lease_ttl, "lease_ttl");
  bounded(options.poll_interval, "poll_interval");
  bounded(options.timeout, "timeout");
  bounded(options.waiter_ttl, "waiter_ttl");
  // A live waiter polls every poll_interval, each poll taking up to timeout: a shorter waiter_ttl would expire it.
  if (options.waiter_ttl.count() != 0 && options.waiter_ttl <= options.poll_interval + options.timeout) {
    throw std::invalid_argument("admit::redis::semaphore: options.waiter_ttl must exceed poll_interval + timeout (" +
                                std::to_string((options.poll_interval + options.timeout).count()) + "ms), got " +
                                std::to_string(options.waiter_ttl.count()) + "ms");
  }
}

}  // namespace

semaphore::semaphore(connection& conn, std::string name, std::int64_t capacity, semaphore_options options) {
  check_semaphore_name(name);
  check_capacity(capacity);
  check_options(options);
  auto waker = std::make_unique<connection>(conn.get_executor(), conn.options());
  connection* w = waker.get();
  core_ = std::make_shared<detail::semaphore_core>(
      conn, std::move(waker), [w] { (void)w->close_for(std::chrono::nanoseconds::zero()); }, std::move(name), capacity,
      std::move(options));
}

semaphore::semaphore(cluster& c, std::string name, std::int64_t capacity, semaphore_options options) {
  check_semaphore_name(name);
  check_capacity(capacity);
  check_options(options);
  // Its own cluster client, seeded with the node this one was given: BLMPOP routes by its key, to the semaphore's slot.
  auto waker =
      std::make_unique<cluster>(c.get_executor(), std::vector<connection_options>{c.node_options()}, c.options());
  cluster* w = waker.get();
  core_ = std::make_shared<detail::semaphore_core>(
      c, std::move(waker), [w] { (void)w->close_for(std::chrono::nanoseconds::zero()); }, std::move(name), capacity,
      std::move(options));
}

semaphore::~semaphore() { core_->shutdown(); }

void semaphore::check_n(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("admit::redis::semaphore: n must be at least 1, got " + std::to_string(n));
}
semaphore_result semaphore::try_acquire(std::int64_t n) {
  check_n(n);
  return core_->try_acquire(n);
}
semaphore_result semaphore::acquire(std::int64_t n, std::stop_token stop) {
  check_n(n);
  return core_->acquire(n, std::nullopt, stop);
}
semaphore_result semaphore::try_acquire_until(clock::time_point deadline, std::int64_t n, std::stop_token stop) {
  check_n(n);
  return core_->acquire(n, deadline, stop);
}

std::error_code semaphore::set_capacity(std::int64_t capacity) {
  check_capacity(capacity);
  const result r = core_->call(core_->call_deadline({}), "set_capacity", {std::to_string(capacity)});
  if (r.error) return std::error_code(r.error);
  if (!integers(r.value, 1)) return std::error_code(1, semaphore_error_category());
  return {};
}

std::pair<semaphore_snapshot, std::error_code> semaphore::inspect(std::size_t most) {
  return parse_snapshot(
      core_->call(core_->call_deadline({}), "inspect", {std::to_string(std::max<std::size_t>(most, 1))}));
}

const std::string& semaphore::name() const noexcept { return core_->name_; }
const semaphore_options& semaphore::options() const noexcept { return core_->options_; }

std::pair<semaphore_snapshot, std::error_code> inspect_semaphore(client& conn, const std::string& name,
                                                                 std::size_t most) {
  check_semaphore_name(name);
  command c{"EVALSHA", semaphore_script().sha1(), "6"};
  for (const auto& k : semaphore_keys(name)) c.arg(k);
  c.arg("inspect").arg("0").arg(std::to_string(std::max<std::size_t>(most, 1)));
  return parse_snapshot(evalsha_until(conn, conn.default_deadline(), semaphore_script(), c));
}

}  // namespace admit::redis
