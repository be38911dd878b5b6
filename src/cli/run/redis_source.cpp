// `admit run --redis` (see redis_source.hpp).
#include "cli/run/redis_source.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>

#include "admit/errc.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/semaphore.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "cli/common/redis_failure.hpp"
#include "cli/common/run_holder.hpp"
#include "cli/common/values.hpp"
#include "cli/run/redis_run_state.hpp"
#include "cli/run/redis_wait_watch.hpp"
#include "cli/run/wait_bounded.hpp"

namespace admit::cli {

namespace {

using redis_run::call_timeout;
using redis_run::past_deadline;
using redis_run::steady;
using redis_run_state = redis_run::state;

// The least time a run with --timeout gives Redis to answer its first request (connecting, and asking for the permit):
// a shorter --timeout would refuse a run whatever the limit's state. With past_deadline, a run ends at most 100 ms
// after its --timeout.
constexpr std::chrono::milliseconds first_answer{50};

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
  run::release_result release() override {
    if (!lease_) return {};
    // A release Redis did not answer is not waited for again at exit (the teardown waits for nothing Redis would have
    // to answer): it was sent, and what the message says of it holds either way.
    const auto unreleased = [&](std::error_code why) {
      st_->abandoned = true;
      // Without an answer the release may still be run by Redis (a Redis whose process stopped reads it once it runs
      // again); refused or cut off, it was not.
      const bool unanswered = why == admit::errc::timeout || why == admit::errc::outcome_unknown;
      return run::release_result{"could not release the lease " + id_ + ": " + st_->failure(why).message +
                                 (unanswered ? "; it is given back if Redis still runs the release sent, else it "
                                               "expires by itself within --lease-ttl"
                                             : "; it expires by itself within --lease-ttl")};
    };
    // Whether Redis still held the lease as the command ended (a loss that no renewal found yet, when the command ended
    // before the next one: Redis restarted without its data, say, and another run may have been admitted). A renewal
    // that finds it gone is sure of it, where a release's "not held" is not: a release whose answer was lost is sent
    // again, and the second finds the lease the first gave back.
    bool lost = lease_.state() == redis::lease_state::lost;
    if (!lost) {
      const auto [held, renew_error] = lease_.renew();
      if (renew_error) {
        // No answer: that renewal may still reach Redis (a Redis paused, not gone) and extend the lease by a whole
        // --lease-ttl then. So the release is sent all the same — it follows the renewal, and whichever Redis reads
        // last, the lease ends released — at the cost of waiting for it too (a second call timeout). The entry that
        // names this run for inspect goes after it, so that a lease left behind is still shown as this run's (and,
        // once its process is gone, as dead). Lost or not stays unknown unless the release is answered.
        const auto [status, error] = lease_.release();
        lease_ = redis::lease();
        st_->hide(id_);
        if (status == redis::lease::release_status::failed) return unreleased(error);
        // Redis answered the release, having had no such lease: a renewal cannot bring a lease back, so it was lost.
        return {std::nullopt, status == redis::lease::release_status::not_held};
      }
      lost = !held;
    }
    // Sent before the release on the same connection; the release's answer comes after it.
    st_->hide(id_);
    const auto [status, error] = lease_.release();
    lease_ = redis::lease();
    if (status == redis::lease::release_status::failed && !lost) {
      // Why, as for any call (it names where): a call that timed out while the connection was refused says so.
      return unreleased(error);
    }
    return {std::nullopt, lost};
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
    if (deadline) deadline = std::max(*deadline, steady::now() + first_answer);
    // With --timeout, Redis has all of it to answer (a server that is slow to answer at first may still admit the run
    // in time); without one, a call's timeout: a run that cannot reach Redis at all says so at once.
    const auto given = deadline ? steady::duration(*deadline - steady::now()) : steady::duration(call_timeout);
    if (auto f = check_ready(st_->conn, std::max<steady::duration>(given, std::chrono::milliseconds(1)), deadline)) {
      return fail(why, *f);
    }
    const call_bound info = bound(deadline);
    if (const auto e = st_->make_limits(info.until)) return fail(why, st_->failure(e, {}, info.had));
    if (s.set_capacity) {
      const call_bound b = bound(deadline);
      const auto e = st_->limit->set_limits_until(redis_run_state::limits(s), b.until);
      // Another number of --classes than the stored definition's, while a run holds or waits.
      if (e == admit::errc::definition_conflict) return fail(why, conflict(deadline));
      if (e) return fail(why, st_->failure(e, {}, b.had));
      if (s.classes.empty()) forget_class_names(deadline);  // one class now: no names
    }
    bool named_classes = false;  // this run wrote the classes' names (the first to give them)
    if (!s.classes.empty()) {
      if (auto f = check_class_names(named_classes, deadline)) return fail(why, *f);
    }
    // The "waiting" event, the status line, and what it says of Redis, once the request is in the queue.
    redis_run::wait_watch watch(*st_, deadline, progress, status_line);
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
    // Redis answered the wait after the run said it could not be reached: said before the run goes on. (Only an answer
    // of Redis's counts: not a timeout, a cancellation, or a failure of the call.)
    const bool answered = r || r.error() == admit::errc::queue_full || r.error() == admit::errc::definition_conflict ||
                          r.error() == admit::errc::exceeds_capacity || r.error() == admit::errc::would_block;
    watch.finish(!cut && !unanswered && answered);
    if (cut) return fail(why, silent());
    st_->hide_waiters(r && s.concurrency > 0 ? r->id() : std::string());
    if (!r) {
      if (r.error() == admit::errc::definition_conflict) {
        // The names were written for a definition that is not the limit's.
        if (named_classes) forget_class_names(deadline);
        return fail(why, conflict(deadline));
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

  // A call on the way to the wait or out of it: `until`, its deadline — a call's timeout, and never past --timeout's
  // deadline (and past_deadline), so that a Redis that stops answering there cannot hold the run past it; `had`, the
  // time Redis had, as a failure names it: --timeout when that is what ends the call, else a call's timeout.
  struct call_bound {
    steady::time_point until;
    std::chrono::nanoseconds had;
  };
  call_bound bound(std::optional<steady::time_point> deadline) const {
    const steady::time_point now = steady::now();
    if (deadline && *deadline + past_deadline < now + call_timeout) {
      const auto given = st_->settings.timeout.value_or(std::chrono::nanoseconds(call_timeout));
      return {std::max(now, *deadline + past_deadline), std::max<std::chrono::nanoseconds>(given, first_answer)};
    }
    return {now + call_timeout, call_timeout};
  }

  // The classes' names: the definition in Redis holds their shares by position, so "a=0.75,b=0.25" and
  // "b=0.75,a=0.25" are the same to it, and each host would take its --class for another class. The runs keep the
  // names under run_classes_key: the first run to give --classes writes them, the others must give the same (or,
  // with --set-capacity, rename them for every host). `wrote`: set when this run wrote them.
  std::optional<redis_failure> check_class_names(bool& wrote, std::optional<steady::time_point> deadline) {
    const run::run_settings& s = st_->settings;
    const std::string key = run_classes_key(s.name), mine = classes_option(s.classes);
    redis::client& c = st_->limit_client();
    // A call's failure as the run reports Redis's (an error reply, WRONGTYPE say, as one).
    const auto call = [&](const redis::command& cmd, std::optional<redis_failure>& failed) {
      const call_bound b = bound(deadline);
      redis::result r = c.execute_command(b.until, cmd);
      if (r.error) failed = st_->failure(r.error, {}, b.had);
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
  // (A name left behind when Redis does not answer in time is rewritten by the next run that gives --classes.)
  void forget_class_names(std::optional<steady::time_point> deadline) {
    (void)st_->limit_client().execute_command(bound(deadline).until, {"DEL", run_classes_key(st_->settings.name)});
  }

  // The limit exists in Redis with another definition: both named as the options that give them, and how to change it.
  // (Read within the run's bound too: Redis may fall silent right after its refusal. Unread: "defined otherwise".)
  redis_failure conflict(std::optional<steady::time_point> deadline) {
    const run::run_settings& s = st_->settings;
    const auto [stored, ec] = redis::inspect_semaphore_until(st_->limit_client(), s.name, bound(deadline).until, 0);
    // (The rate in the stored one's form, so that equal rates read alike.)
    const std::string given =
        described(s.concurrency > 0 ? std::optional<std::int64_t>(s.concurrency) : std::nullopt,
                  s.rate ? s.rate->to_string() + " --burst " + std::to_string(s.burst) : std::string(),
                  s.classes.empty() ? std::string() : " --classes " + classes_option(s.classes));
    redis_failure f;
    f.error = admit::errc::definition_conflict;
    const std::size_t theirs = stored.classes.empty() ? 1 : stored.classes.size();
    const std::size_t ours = s.classes.empty() ? 1 : s.classes.size();
    // set_limits changes the number of classes only while nobody holds or waits (each lease and waiter keeps its
    // class's number).
    std::string remedy = "add --set-capacity to make it this run's for every host";
    if (!ec && theirs != ours) {
      remedy = s.set_capacity ? "the number of classes of a limit changes only while no run of it holds a permit or "
                                "waits (admit inspect lists them): try again then, or give another --name"
                              : remedy +
                                    " (the number of classes changes only while no run of it holds a permit or "
                                    "waits)";
    }
    f.message =
        quote(s.name) + " at " + st_->where() + " is " +
        (ec ? "defined otherwise" : as_options(stored, stored.classes.size() > 1 ? stored_class_names(deadline) : "")) +
        ", not " + given + ": every admit run of one name must give the same; " + remedy;
    return f;
  }
  // The classes as the runs of the name gave them (run_classes_key), or "" when that cannot be read in time.
  std::string stored_class_names(std::optional<steady::time_point> deadline) {
    const redis::result r =
        st_->limit_client().execute_command(bound(deadline).until, {"GET", run_classes_key(st_->settings.name)});
    return !r.error && r.value.is_string() ? r.value.str() : std::string();
  }
  // A stored definition as the options that would give it; `names`: its classes as --classes gave them ("": not
  // known, then only their number is said).
  static std::string as_options(const redis::semaphore_snapshot& d, const std::string& names) {
    const auto named = static_cast<std::size_t>(std::count(names.begin(), names.end(), ',')) + 1;
    std::string classes;
    if (d.classes.size() > 1 && !names.empty() && named == d.classes.size()) {
      classes = " --classes " + names;
    } else if (d.classes.size() > 1) {
      classes = " with " + std::to_string(d.classes.size()) + " --classes";
    }
    std::string s = described(
        d.capacity < redis::admission::unlimited_capacity ? std::optional<std::int64_t>(d.capacity) : std::nullopt,
        d.token_interval.count() == 0
            ? std::string()
            : admit::rate::every(d.token_interval).to_string() + " --burst " + std::to_string(d.burst),
        classes);
    return s;
  }
  // A definition as options: "--concurrency 2, without --rate", "--rate 5/s --burst 1, without --concurrency", or
  // both; `rate`: "R --burst B", empty for none; `classes`: " --classes ..." or " with N --classes", empty for none.
  static std::string described(std::optional<std::int64_t> concurrency, const std::string& rate,
                               const std::string& classes) {
    std::string s = concurrency ? "--concurrency " + std::to_string(*concurrency) : std::string();
    if (!rate.empty()) s += (s.empty() ? "--rate " : " --rate ") + rate;
    s += classes;
    if (!concurrency) return s + ", without --concurrency";
    return rate.empty() ? s + ", without --rate" : s;
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
      why.message = run::not_admitted_in_time(st_->settings, what);
      if (unanswered) {
        // Redis did not answer at the end of the wait: what held the run back cannot be told, and its silence is
        // what the user must hear of.
        why.message = "not admitted within --timeout: " + st_->holder_where() + " did not answer (no reply within " +
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
  // A waiter keeps its place through a Redis outage (or a partition) as long as a holder keeps its lease: --lease-ttl,
  // rather than the semaphore's default of 3 polls and a call (4 s), after which a Redis that stopped answering for 5 s
  // took every waiter for dead and they joined again in the order they came back.
  so.waiter_ttl = std::max(so.lease_ttl, 3 * so.poll_interval + so.timeout);
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
    throw usage_error("invalid --rate " + quote(s.rate_text) + " with --burst " + std::to_string(s.burst) + ": " +
                      without_cpp_name(e.what()));
  }
  return std::make_unique<redis_source>(std::move(st));
}

}  // namespace admit::cli
