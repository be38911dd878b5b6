// `admit run --redis` (see run_source.hpp).
#include "cli/run/redis_source.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "admit/errc.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/semaphore.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/io_runner.hpp"
#include "cli/common/message.hpp"
#include "cli/common/redis_failure.hpp"
#include "cli/common/redis_topology.hpp"
#include "cli/common/run_holder.hpp"
#include "cli/common/values.hpp"
#include "cli/run/wait_bounded.hpp"

namespace admit::cli {

namespace {

using steady = std::chrono::steady_clock;

// The deadline of each Redis call (connecting included).
constexpr std::chrono::milliseconds call_timeout{1'000};
// How often the status line asks Redis how many wait and hold (only when a terminal shows it).
constexpr std::chrono::milliseconds status_every{500};
// How long past --timeout a wait may still take to end (its leave-queue call answered): beyond it, Redis is not
// answering and the wait is abandoned (its entry expires in Redis by itself).
constexpr std::chrono::milliseconds past_deadline{50};

// Everything the source and its permits share: the connection and its thread, the admission (the rate and the
// concurrency limit, decided together in Redis), and the eventfd that says the lease was lost. Destroyed last (the
// permit holds it).
struct redis_run_state {
  run::run_settings settings;
  run::entry_info info;
  io_runner io;
  redis::connection conn;                 // the URL's server: checked first; the limit's when it is not a cluster
  std::unique_ptr<redis::cluster> nodes;  // when the URL's server is a Redis Cluster node (a seed of this client)
  int lost = -1;                          // eventfd, written by the semaphore's on_lease_lost
  std::unique_ptr<redis::admission> limit;
  std::function<void()> on_queued;  // set while an acquisition waits
  // The ids this wait joined the queue with and when, the last one current (guarded by mutex).
  std::vector<std::pair<std::string, std::int64_t>> waiter_ids;
  // Set when Redis did not answer in time what ends a wait (the wait itself, or its queue-leave within
  // past_deadline): the teardown then waits for nothing Redis would have to answer (what is left expires there).
  bool abandoned = false;
  std::mutex mutex;
  redis::semaphore_options semaphore_options;

  // Once Redis answers: asks the URL's server whether it is a Redis Cluster node (then the limit goes through a
  // cluster client seeded with it: its keys share the hash tag {name}, one slot) and makes the admission. A server
  // that does not answer INFO (an ACL user without it) is taken as a single server.
  void make_limits() {
    if (limit) return;
    // The whole call timeout, whatever is left of --timeout: an INFO cut short would take a cluster node for a
    // single server (decided once), and its MOVED replies for a lasting failure.
    nodes = learn_topology(conn, call_timeout).nodes;
    limit = nodes ? std::make_unique<redis::admission>(*nodes, settings.name, limits(settings), semaphore_options)
                  : std::make_unique<redis::admission>(conn, settings.name, limits(settings), semaphore_options);
  }
  // --concurrency, --rate and --burst as the admission's definition.
  static admission_options limits(const run::run_settings& s) {
    admission_options o;
    o.max_in_flight = s.concurrency;
    if (s.rate) {
      o.rate = *s.rate;
      o.burst = s.burst;
    }
    o.classes = s.classes;
    return o;
  }

  redis_run_state(const run::run_settings& s, const run::entry_info& i, const redis::connection_options& o)
      : settings(s), info(i), conn(io.executor(), o), lost(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (lost < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~redis_run_state() {
    if (limit) {
      if (abandoned) {
        (void)limit->shutdown(steady::now());
      } else {
        (void)limit->shutdown();
      }
    }
    limit.reset();
    if (nodes) (void)(abandoned ? nodes->close_until(steady::now()) : nodes->close());
    if (abandoned) (void)conn.close_until(steady::now());
    ::close(lost);
  }
  // What inspect shows of this run under `id` (run_holder.hpp): since `started_unix_ms` it waits or holds. Not waited
  // for: called on the executor, and by the supervisor between signals it must forward at once.
  void show(const std::string& id, std::int64_t started_unix_ms) {
    const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(settings.lease_ttl);
    run_entry e{info, ttl};
    e.info.started_unix_ms = started_unix_ms;
    redis::client& c = limit_client();
    c.async_execute_command(c.default_deadline(),
                            redis::command{"SET", run_holder_key(settings.name, id), to_json(e), "PX",
                                           std::to_string(std::max<std::int64_t>(3 * ttl.count(), 1))},
                            [](boost::system::error_code, redis::reply) {});
  }
  void hide(const std::string& id) {
    redis::client& c = limit_client();
    c.async_execute_command(c.default_deadline(), redis::command{"DEL", run_holder_key(settings.name, id)},
                            [](boost::system::error_code, redis::reply) {});
  }
  // The wait has ended: the entries of its waiter ids go, but `kept` (the lease it got, under the same id).
  void hide_waiters(const std::string& kept) {
    std::vector<std::pair<std::string, std::int64_t>> ids;
    {
      std::lock_guard lock(mutex);
      ids.swap(waiter_ids);
    }
    for (const auto& [id, since] : ids) {
      if (id != kept) hide(id);
    }
  }
  // The wait joined the queue as `id` (on the executor).
  void queued_as(const std::string& id) {
    const std::int64_t now = run::unix_time_ms();
    {
      std::lock_guard lock(mutex);
      waiter_ids.emplace_back(id, now);
      if (on_queued) on_queued();
    }
    show(id, now);
  }
  // Writes the current waiter's entry again (it lives 3 × --lease-ttl).
  void show_waiter() {
    std::optional<std::pair<std::string, std::int64_t>> last;
    {
      std::lock_guard lock(mutex);
      if (!waiter_ids.empty()) last = waiter_ids.back();
    }
    if (last) show(last->first, last->second);
  }
  // Where the limit's keys live (one hash slot: every key is "{name}:...").
  redis::client& limit_client() { return nodes ? static_cast<redis::client&>(*nodes) : conn; }
  std::string where() const { return redis_address(conn.options()); }
  // Why the limit's Redis cannot be reached now, from the client's own state (no call): empty when it can, or when
  // that is not known (a server that is connected and silent).
  std::string unreachable() const {
    if (nodes) {
      const auto [e, text] = nodes->last_failure();
      return e ? "cannot reach " + where() + "'s cluster: " + (text.empty() ? e.message() : text) : std::string();
    }
    if (conn.is_connected()) return {};
    const std::error_code e = conn.last_connect_error();
    return e ? "cannot connect to " + where() + ": " + e.message() : std::string();
  }
  // Why a call on the limit failed (through the cluster's nodes when there are any).
  redis_failure failure(std::error_code error, std::string_view reply_text = {}) const {
    return nodes ? call_failure(conn, *nodes, error, reply_text, call_timeout)
                 : call_failure(conn, error, reply_text, call_timeout);
  }
};

class redis_held final : public run::held_permit {
 public:
  // `l`: the permit the run holds; none when only the rate limits it (`token`: the fencing token of its admission).
  redis_held(std::shared_ptr<redis_run_state> st, redis::lease l, std::int64_t token = 0)
      : st_(std::move(st)), lease_(std::move(l)), token_(token) {
    if (lease_) {
      id_ = lease_.id();
      token_ = lease_.fencing_token();
    } else {
      id_ = "rate:" + std::to_string(st_->info.pid) + ":" + std::to_string(st_->info.started_unix_ms);
    }
    maintain();
  }
  std::string lease_id() const override { return id_; }
  std::int64_t fencing_token() const override { return token_; }
  int lost_fd() const override { return lease_ ? st_->lost : -1; }
  std::optional<std::chrono::nanoseconds> maintenance_interval() const override {
    if (!lease_) return std::nullopt;
    return st_->settings.lease_ttl;
  }
  // The entry lives 3 × --lease-ttl; the supervisor calls this every --lease-ttl.
  void maintain() override {
    if (lease_) st_->show(id_, started_unix_ms_);
  }
  std::optional<std::string> release() override {
    if (!lease_) return std::nullopt;
    // Sent before the release on the same connection; the release's answer comes after it.
    st_->hide(id_);
    const bool lost = lease_.state() == redis::lease_state::lost;  // already said; Redis no longer has it anyway
    const auto [status, error] = lease_.release();
    lease_ = redis::lease();
    if (status == redis::lease::release_status::failed && !lost) {
      return "could not release the lease " + id_ + " at " + st_->where() + " (" + error.message() +
             "): it expires by itself within --lease-ttl";
    }
    return std::nullopt;
  }

 private:
  std::shared_ptr<redis_run_state> st_;
  redis::lease lease_;
  std::int64_t started_unix_ms_ = run::unix_time_ms();  // what inspect shows is the run time, not the wait
  std::string id_;
  std::int64_t token_ = 0;
};

class redis_source final : public run::permit_source {
 public:
  explicit redis_source(std::shared_ptr<redis_run_state> st) : st_(std::move(st)) {}

  std::unique_ptr<run::held_permit> acquire(std::optional<steady::time_point> deadline, bool no_wait,
                                            std::stop_token stop,
                                            const std::function<void(const run::wait_progress&)>& progress,
                                            bool status_line, run::refusal& why) override {
    const run::run_settings& s = st_->settings;
    // With --timeout, Redis has all of it to answer (a server that is slow to answer at first may still admit the run
    // in time); without one, a call's timeout: a run that cannot reach Redis at all says so at once.
    const auto given = deadline ? steady::duration(*deadline - steady::now()) : steady::duration(call_timeout);
    if (auto f = check_ready(st_->conn, std::max<steady::duration>(given, std::chrono::milliseconds(1)), deadline)) {
      return fail(why, *f);
    }
    st_->make_limits();
    if (s.set_capacity) {
      if (const auto e = st_->limit->set_limits(redis_run_state::limits(s))) {
        // Another number of --classes than the stored definition's: set_limits cannot change it.
        return fail(why, e == admit::errc::definition_conflict ? conflict() : st_->failure(e));
      }
    }
    bool named_classes = false;  // this run wrote the classes' names (the first to give them)
    if (!s.classes.empty()) {
      if (auto f = check_class_names(named_classes)) return fail(why, *f);
    }
    // The status line and the "waiting" event once the request is in the queue.
    std::mutex m;
    std::condition_variable_any cv;
    bool queued = false;
    {
      std::lock_guard lock(st_->mutex);
      st_->on_queued = [&] {
        std::lock_guard l(m);
        queued = true;
        cv.notify_all();
      };
    }
    std::jthread status([&](std::stop_token done) {
      std::unique_lock l(m);
      if (!cv.wait(l, done, [&] { return queued; })) return;
      l.unlock();
      // The entry inspect shows of this waiter lives 3 × --lease-ttl: written again every --lease-ttl.
      auto show_again = steady::now() + s.lease_ttl;
      run::wait_progress last;  // as told last: told again with the trouble when Redis goes away or comes back
      for (bool first = true;; first = false) {
        const std::string trouble = st_->unreachable();
        // Told when Redis goes away or comes back (not at each new reason while it is away).
        if (!first && trouble.empty() != last.trouble.empty() && (!status_line || !trouble.empty())) {
          last.trouble = trouble;
          if (progress) progress(last);
        }
        if (first || (status_line && trouble.empty())) {  // the "waiting" event; then, with a status line, updates
          run::wait_progress p;  // position 0: Redis does not say a waiter's place without its identity
          p.capacity = s.concurrency;
          // Bounded by the wait's end, so that joining this thread cannot hold the run past --timeout.
          const auto by_call = steady::now() + call_timeout;
          const auto [snap, ec] = redis::inspect_semaphore_until(
              st_->limit_client(), s.name, deadline ? std::min(by_call, *deadline + past_deadline) : by_call, 1);
          if (!ec) {
            p.waiting = static_cast<std::size_t>(snap.waiter_count);
            if (s.concurrency > 0) {
              p.held = snap.capacity - snap.available;
              p.capacity = snap.capacity;
            }
            // The rate's tokens are short: the head starts once they are there (this run after those ahead of it).
            if (snap.token_interval.count() > 0 && snap.tokens < s.weight) {
              p.rate_wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  snap.token_interval * (s.weight - snap.tokens - 1) + snap.next_token);
            }
          }
          if (!ec) last = p;
          if (progress && (first || !ec)) progress(p);
        }
        l.lock();
        // (Every status_every even without a status line: whether Redis can be reached is the client's own state.)
        cv.wait_until(l, done, std::min(show_again, steady::now() + status_every), [] { return false; });
        if (done.stop_requested()) return;
        l.unlock();
        if (steady::now() >= show_again) {
          st_->show_waiter();
          show_again = steady::now() + s.lease_ttl;
        }
      }
    });
    redis::semaphore_result r = admit::errc::would_block;
    bool cut = false;         // Redis did not end the wait by --timeout
    bool unanswered = false;  // nor answer its queue-leave within past_deadline
    redis::admission& limit = *st_->limit;
    if (no_wait) {
      r = limit.try_acquire(s.priority, s.weight);
    } else {
      // Asynchronous, so that this thread ends the wait by --timeout even when Redis does not answer the call that
      // would end it.
      const auto initiate = [&](boost::asio::cancellation_slot slot, auto done) {
        auto handler = boost::asio::bind_cancellation_slot(slot, [done](std::error_code ec, redis::lease l) {
          done(ec ? redis::semaphore_result(ec) : redis::semaphore_result(std::move(l)));
        });
        if (deadline) {
          limit.async_acquire_until(*deadline, s.priority, s.weight, std::move(handler));
        } else {
          limit.async_acquire(s.priority, s.weight, std::move(handler));
        }
      };
      r = wait_bounded<redis::semaphore_result>(st_->conn.get_executor(), initiate, past(deadline), stop, cut);
      if (!r && !cut) {
        // An asynchronous wait that ends leaves the queue in the background: its call answered within past_deadline
        // of --timeout, or it is left to expire in Redis.
        auto until = steady::now() + call_timeout;
        if (deadline) until = std::min(until, std::max(steady::now(), *deadline) + past_deadline);
        unanswered = limit.shutdown(until).first > 0;
      }
      st_->abandoned = cut || unanswered;
    }
    status.request_stop();
    status.join();
    {
      std::lock_guard lock(st_->mutex);
      st_->on_queued = nullptr;
    }
    if (cut) return fail(why, silent());
    st_->hide_waiters(r && s.concurrency > 0 ? r->id() : std::string());
    if (!r) {
      if (r.error() == admit::errc::definition_conflict) {
        if (named_classes) forget_class_names();  // the names were written for a definition that is not the limit's
        return fail(why, conflict());
      }
      // A timeout before the deadline is the rate's answer: it could not admit the run by then.
      return refuse(why, r.error(), r.error() == admit::errc::timeout && deadline, unanswered);
    }
    if (s.concurrency > 0) return std::make_unique<redis_held>(st_, std::move(*r));
    // The rate alone: the tokens are spent, the lease's permit limits nothing; it goes back at once.
    const std::int64_t token = r->fencing_token();
    (void)r->release();
    return std::make_unique<redis_held>(st_, redis::lease(), token);
  }

 private:
  // How long a wait may take: `deadline` and the time its last call may take to be answered.
  static std::optional<steady::time_point> past(std::optional<steady::time_point> deadline) {
    if (!deadline) return std::nullopt;
    return *deadline + past_deadline;
  }

  // Why a wait was abandoned: Redis did not answer by --timeout (down, or not answering on a connection that is up).
  redis_failure silent() const {
    redis_failure f = st_->failure(admit::errc::timeout);
    if (!st_->nodes && st_->conn.is_connected() && f.error == admit::errc::timeout) {
      f.message = "no answer from " + st_->where() + " by the end of --timeout: Redis stopped answering while " +
                  quote(st_->settings.name) + " was waited for";
    }
    return f;
  }

  // The classes' names: the definition in Redis holds their shares by position, so "a=0.75,b=0.25" and
  // "b=0.75,a=0.25" are the same to it, and each host would take its --class for another class. The runs keep the
  // names under run_classes_key: the first run to give --classes writes them, the others must give the same (or,
  // with --set-capacity, rename them for every host). `wrote`: set when this run wrote them.
  std::optional<redis_failure> check_class_names(bool& wrote) {
    const run::run_settings& s = st_->settings;
    const std::string key = run_classes_key(s.name), mine = classes_option(s.classes);
    redis::client& c = st_->limit_client();
    // A call's failure as the run reports Redis's (an error reply, WRONGTYPE say, as one).
    const auto call = [&](const redis::command& cmd, std::optional<redis_failure>& failed) {
      redis::result r = c.execute_command(steady::now() + call_timeout, cmd);
      if (r.error) failed = st_->failure(r.error);
      if (!r.error && r.value.is_error()) failed = st_->failure(admit::errc::error_reply, r.value.str());
      return r.value;
    };
    std::optional<redis_failure> failed;
    if (s.set_capacity) {
      (void)call({"SET", key, mine}, failed);
      return failed;
    }
    const redis::reply set = call({"SET", key, mine, "NX"}, failed);
    if (failed) return failed;
    if (!set.is_nil()) {
      wrote = true;
      return std::nullopt;
    }
    const redis::reply stored = call({"GET", key}, failed);
    if (failed) return failed;
    if (!stored.is_string() || stored.str() == mine) return std::nullopt;  // gone meanwhile: not ours to check
    redis_failure f;
    f.error = admit::errc::definition_conflict;
    f.message = quote(s.name) + " at " + st_->where() + " has --classes " + stored.str() + ", not --classes " + mine +
                ": every admit run of one name must give the same classes, by the same names in the same " +
                "order; add --set-capacity to make them this run's for every host";
    return f;
  }
  void forget_class_names() {
    redis::client& c = st_->limit_client();
    (void)c.execute_command(steady::now() + call_timeout, {"DEL", run_classes_key(st_->settings.name)});
  }

  // The limit exists in Redis with another definition: both named as the options that give them, and how to change it.
  redis_failure conflict() {
    const run::run_settings& s = st_->settings;
    const auto [stored, ec] = st_->limit->inspect(0);
    std::string given = s.concurrency > 0 ? "--concurrency " + std::to_string(s.concurrency) : "no --concurrency";
    given += s.rate ? " --rate " + s.rate->to_string() + " --burst " + std::to_string(s.burst) : " without --rate";
    if (!s.classes.empty()) given += " --classes " + classes_option(s.classes);
    redis_failure f;
    f.error = admit::errc::definition_conflict;
    // set_limits changes everything but the number of classes (each class's queue and holders live on).
    const std::size_t theirs = stored.classes.empty() ? 1 : stored.classes.size();
    const std::size_t ours = s.classes.empty() ? 1 : s.classes.size();
    const std::string remedy = !ec && theirs != ours
                                   ? "the number of classes of a limit cannot change while it exists in Redis (give "
                                     "another --name)"
                                   : "add --set-capacity to make it this run's for every host";
    f.message = quote(s.name) + " at " + st_->where() + " is " + (ec ? "defined otherwise" : as_options(stored)) +
                ", not " + given + ": every admit run of one name must give the same; " + remedy;
    return f;
  }
  // A stored definition as the options that would give it.
  static std::string as_options(const redis::semaphore_snapshot& d) {
    std::string s = d.capacity < redis::admission::unlimited_capacity ? "--concurrency " + std::to_string(d.capacity)
                                                                      : "no --concurrency";
    s += d.token_interval.count() == 0
             ? " without --rate"
             : " --rate " + admit::rate::every(d.token_interval).to_string() + " --burst " + std::to_string(d.burst);
    if (d.classes.size() > 1) s += " with " + std::to_string(d.classes.size()) + " --classes";
    return s;
  }

  std::unique_ptr<run::held_permit> fail(run::refusal& why, const redis_failure& f) {
    why.error = f.error;
    why.message = "not admitted: " + f.message;
    const bool capacity = f.error == admit::errc::exceeds_capacity;
    const bool definition = f.error == admit::errc::definition_conflict;
    why.exit_status = capacity || definition ? exit_bad_input : f.exit_status();
    why.reason = capacity ? "capacity" : definition ? "definition" : "redis";
    return nullptr;
  }

  // `out_of_time`: errc::timeout is --timeout's; otherwise it is a Redis call's (no answer), not the wait's.
  // `unanswered`: the wait's queue-leave got no answer within past_deadline (left to expire in Redis).
  std::unique_ptr<run::held_permit> refuse(run::refusal& why, std::error_code e, bool out_of_time,
                                           bool unanswered = false) {
    const std::string what = quote(st_->settings.name) + " at " + st_->where();
    why.error = e;
    why.exit_status = run::exit_not_admitted;
    if (e == admit::errc::timeout && out_of_time) {
      // Waiting out --timeout while Redis could not be reached is Redis's failure, not a busy limit.
      if (const redis_failure f = st_->failure(e); f.error != admit::errc::timeout) return fail(why, f);
      why.message = "not admitted: no permit of " + what + " within --timeout";
      if (unanswered) {
        // Redis did not answer at the end of the wait: what held the run back cannot be told, and its silence is
        // what the user must hear of.
        why.message = "not admitted within --timeout: " + st_->where() + " did not answer (no reply within " +
                      format_duration(past_deadline) + " to the call that takes the run out of the queue of " +
                      quote(st_->settings.name) + "; the entry expires there by itself)";
        why.reason = "redis";
      }
    } else if (e == admit::errc::would_block) {
      why.message = "not admitted: " + what + " is busy (--no-wait)";
    } else if (e == admit::errc::queue_full) {
      why.message = run::queue_full_message(st_->settings.max_waiters.value_or(0), what);
    } else if (e == admit::errc::cancelled) {
      why.message = "not admitted: stopped while waiting for " + what;
    } else if (e == admit::errc::exceeds_capacity) {
      why.message = "not admitted: --weight " + std::to_string(st_->settings.weight) +
                    " is more than the capacity of " + what + " (a semaphore that exists keeps its capacity)";
      why.exit_status = exit_bad_input;
    } else {
      return fail(why, st_->failure(e));
    }
    return nullptr;
  }

  std::shared_ptr<redis_run_state> st_;
};

}  // namespace

std::unique_ptr<run::permit_source> make_redis_run_source(const run::run_settings& s, const run::entry_info& info) {
  redis::connection_options co;
  try {
    co = redis::parse_url(*s.redis);
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("--redis: ") + e.what());
  }
  co.connect_timeout = call_timeout;
  auto st = std::make_shared<redis_run_state>(s, info, co);
  redis::semaphore_options& so = st->semaphore_options;
  so.lease_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(s.lease_ttl);
  if (s.max_waiters) so.max_waiters = *s.max_waiters;
  so.timeout = call_timeout;
  so.poll_interval =
      std::min<std::chrono::milliseconds>(so.poll_interval, std::max(so.lease_ttl / 4, std::chrono::milliseconds(1)));
  so.on_lease_lost = [lost = st->lost](const std::string&, std::int64_t) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(lost, &one, sizeof one);
  };
  std::weak_ptr<redis_run_state> weak = st;
  so.on_queued = [weak](const std::string& id) {
    if (auto p = weak.lock()) p->queued_as(id);
  };
  // The checks the constructor makes, made now: bad input is exit status 2 before any connection.
  try {
    redis::check_semaphore_name(s.name);
  } catch (const std::invalid_argument& e) {
    throw usage_error("invalid --name " + quote(s.name) + ": " + without_cpp_name(e.what()));
  }
  if (s.concurrency > redis::admission::unlimited_capacity) {
    throw usage_error("invalid --concurrency " + std::to_string(s.concurrency) +
                      ": at most 1125899906842624 (2^50) with --redis");
  }
  try {
    (void)redis::describe(redis_run_state::limits(s));
  } catch (const std::invalid_argument& e) {
    throw usage_error("invalid --rate " + (s.rate ? quote(s.rate->to_string()) : std::string("inf")) +
                      " with --burst " + std::to_string(s.burst) + ": " + without_cpp_name(e.what()));
  }
  return std::make_unique<redis_source>(std::move(st));
}

}  // namespace admit::cli
