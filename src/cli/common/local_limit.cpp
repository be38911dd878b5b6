// cli/common/local_limit.cpp — the host-local limit of `admit run`: joining, waiting and admitting (the files:
// local_queue.cpp; the decision of each look: local_rule.cpp).
//
// Why the liveness test is race-free: an entry is created (O_EXCL), flock'ed by its creator and filled in within one
// hold of `lock` (local::create_entry), and every reader that tests liveness (scan_live, from acquire and inspect)
// holds `lock` too. So no reader can see an entry that exists but is not yet locked: a LOCK_NB that succeeds means
// every process holding the entry's open file description has closed it or died. Renames (w. -> h.) and removals
// are made under `lock` as well, so a reader's listing is never stale while it holds `lock`. (The alternative, create
// under a temporary name and rename, would need the temporary names ignored and cleaned up; this needs nothing.)
#include "cli/common/local_limit.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "admit/detail/admission_classes.hpp"
#include "admit/detail/admission_rule.hpp"
#include "admit/errc.hpp"
#include "admit/rate.hpp"
#include "cli/common/local_queue.hpp"
#include "cli/common/local_rule.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"

namespace admit::cli::run {

namespace {

using std::chrono::nanoseconds;
using std::chrono::steady_clock;

// How long leaving the queue waits for the limit's lock before it leaves without it.
constexpr std::chrono::milliseconds lock_patience{2000};

[[noreturn]] void invalid(const std::string& message) { throw std::invalid_argument("local limit: " + message); }

bool same_state(const wait_progress& a, const wait_progress& b) {
  return a.position == b.position && a.waiting == b.waiting && a.held == b.held && a.capacity == b.capacity &&
         a.rate_wait.has_value() == b.rate_wait.has_value();
}

// This participant's entry while it waits: removed (under `lock`) unless admitted.
class entry_guard {
 public:
  entry_guard(const local::queue_dir& q, local::unique_fd fd, std::uint64_t ticket) noexcept
      : q_(q), fd_(std::move(fd)), ticket_(ticket) {}
  entry_guard(const entry_guard&) = delete;
  entry_guard& operator=(const entry_guard&) = delete;
  ~entry_guard() {
    if (!fd_) return;
    // Without the lock when another process holds it past a short wait (a run stopped inside its critical section)
    // or it cannot be taken: the entry, unlocked by the close, is removed by the next reader if still there.
    try {
      const auto lock = q_.lock_within(lock_patience);
      leave();
    } catch (...) {
      leave();
    }
  }
  // Under lock: removes the entry and closes it.
  void leave() noexcept {
    local::remove_entry(q_, holder_, ticket_);
    fd_.reset();
  }
  // Under lock: the entry becomes h.<ticket>; the fd is handed over.
  int promote() {
    local::promote_entry(q_, ticket_);
    holder_ = true;
    return fd_.release();
  }
  int fd() const noexcept { return fd_.get(); }

 private:
  const local::queue_dir& q_;
  local::unique_fd fd_;
  std::uint64_t ticket_;
  bool holder_ = false;
};

// Which changes of the queue can let a waiter in: a waiter behind the head of its class waits for the one right ahead
// of it in its class (`ahead`: its ticket) to go — admitted, cancelled or dead —, since only the head may be admitted;
// the head waits for anything that may free permits or change the share rule's pick: a holder's change, or a waiter
// ahead of it (of another class) that goes. A waiter behind it (a new one above all) never can: the events of those
// are not the waiter's business. (Every waiter waking to scan the whole queue at every change made a crowd cost the
// square of its size.)
struct relevant_changes {
  std::uint64_t self = 0;
  std::uint64_t ahead = 0;  // 0: none, it is the head of its class (tickets start at 1)
  [[nodiscard]] bool of(const char* name) const {
    const auto entry = local::parse_entry_name(name);
    if (!entry) return false;  // `lock`, `sequence` and `rate`: opened by every check (they would wake everyone)
    const auto [holder, ticket] = *entry;
    if (ticket == self) return true;  // its own entry, removed by hand
    if (ahead != 0) return !holder && ticket == ahead;
    return holder || ticket < self;
  }
};

// Waits for an event on `fds` or `timeout` (`inotify_fd` -1: no watch, poll() skips it). Returns whether an inotify
// event is one of `changes` (or the queue overflowed).
bool wait_for_events(int inotify_fd, int event_fd, nanoseconds timeout, const relevant_changes& changes) {
  pollfd fds[2] = {{inotify_fd, POLLIN, 0}, {event_fd, POLLIN, 0}};
  timeout = std::max(timeout, nanoseconds(0));
  timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000), static_cast<long>(timeout.count() % 1'000'000'000)};
  if (::ppoll(fds, 2, &ts, nullptr) < 0 && errno != EINTR) {
    throw std::system_error(errno, std::generic_category(), "local limit: ppoll");
  }
  bool relevant = false;
  alignas(inotify_event) char buf[4096];
  while (inotify_fd >= 0) {
    ssize_t n = ::read(inotify_fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if ((ev->mask & IN_Q_OVERFLOW) != 0) relevant = true;
      if (ev->len > 0 && changes.of(ev->name)) relevant = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  return relevant;
}

}  // namespace

void check_local_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 200 && name != "." && name != ".." &&
            std::all_of(name.begin(), name.end(), [](char ch) {
              return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                     ch == '_' || ch == '-';
            });
  if (!ok) {
    throw std::invalid_argument("invalid limit name \"" + name +
                                "\": a local limit's name is 1 to 200 of the characters A-Z a-z 0-9 . _ - "
                                "(and not \".\" or \"..\")");
  }
}

local_permit::local_permit(int fd, std::filesystem::path entry, std::filesystem::path lock, std::uint64_t ticket,
                           int watch) noexcept
    : fd_(fd), watch_(watch), entry_(std::move(entry)), lock_(std::move(lock)), ticket_(ticket) {}

local_permit::local_permit(local_permit&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      watch_(std::exchange(o.watch_, -1)),
      entry_(std::move(o.entry_)),
      lock_(std::move(o.lock_)),
      ticket_(o.ticket_) {}

local_permit& local_permit::operator=(local_permit&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
    watch_ = std::exchange(o.watch_, -1);
    entry_ = std::move(o.entry_);
    lock_ = std::move(o.lock_);
    ticket_ = o.ticket_;
  }
  return *this;
}

local_permit::~local_permit() { release(); }

void local_permit::release() noexcept {
  if (fd_ < 0) return;
  // Under `lock`, so that no reader sees the entry unlocked but present. Without it (cannot open: the directory
  // was removed, no fds left), the unlocked entry is still released: readers remove it as dead.
  int lock = ::open(lock_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (lock >= 0) {
    while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ::unlink(entry_.c_str());
  ::flock(fd_, LOCK_UN);  // frees the lock for the command's inherited copy of the description too
  ::close(fd_);
  fd_ = -1;
  if (lock >= 0) ::close(lock);
  if (watch_ >= 0) ::close(watch_);  // slow (see watch_), and the permit is free already
  watch_ = -1;
}

local_limit::local_limit(local_limit_config config) : config_(std::move(config)) {
  const auto& c = config_;
  check_local_name(c.name);
  if (c.capacity < 0) invalid("capacity " + std::to_string(c.capacity) + " is negative (accepted: 0 for none, or 1..)");
  if (c.weight < 1) invalid("weight " + std::to_string(c.weight) + " is below 1 (accepted: 1..capacity)");
  if (c.interval && c.interval->count() <= 0) {
    invalid("rate interval " + std::to_string(c.interval->count()) + "ns is not positive");
  }
  if (c.burst < 1) invalid("burst " + std::to_string(c.burst) + " is below 1 (accepted: 1..)");
  // Bounded so that the GCRA arithmetic (at most three tolerances added) cannot overflow.
  if (c.interval && c.burst > (std::int64_t{1} << 61) / c.interval->count()) {
    invalid("burst " + std::to_string(c.burst) + " times the rate interval exceeds 2^61 ns (about 73 years)");
  }
  if (c.capacity == 0 && !c.interval) invalid("neither a capacity nor a rate: one of them is needed");
  if (c.poll_interval.count() <= 0) invalid("poll interval " + std::to_string(c.poll_interval.count()) + "ns");
  if (c.watched_poll_interval.count() <= 0) {
    invalid("watched poll interval " + std::to_string(c.watched_poll_interval.count()) + "ns");
  }
  if (c.classes.size() == 1) invalid("one class is the limit itself: give two classes or none");
  if (c.priority >= std::max<std::size_t>(1, c.classes.size())) {
    invalid("class " + std::to_string(c.priority) + " is out of range: " +
            (c.classes.empty()
                 ? std::string("0 without classes")
                 : "0 to " + std::to_string(c.classes.size() - 1) + " (" + classes_option(c.classes) + ")"));
  }
  plan_ = local::plan_of(definition());  // std::invalid_argument naming the value, as admit::admission's constructor
  local::queue_dir(c.directory, c.name, true);
}

admit::expected<local_permit, std::error_code> local_limit::acquire(
    std::optional<steady_clock::time_point> deadline, bool no_wait, std::stop_token stop,
    const std::function<void(const wait_progress&)>& progress, nanoseconds progress_every) {
  const auto& c = config_;
  if ((c.capacity > 0 && c.weight > c.capacity) || (c.interval && c.weight > c.burst)) return errc::exceeds_capacity;
  if (stop.stop_requested()) return errc::cancelled;

  local::queue_dir q(c.directory, c.name, true);
  // The watch of the queue is made only when the first check does not admit (an admission without waiting costs no
  // inotify descriptor, whose close is slow); the check right after it sees whatever changed before it.
  local::unique_fd inotify;

  local::entry_record self{0, false, c.weight, c.priority, c.info, definition()};
  std::optional<entry_guard> entry;  // declared before every `lock`, so that its destructor runs without it
  // Under lock: admits this participant (evaluate said so).
  auto admit_now = [&](const local::evaluation& e) {
    if (!plan_.global.inf()) local::write_buckets(q, plan_, e.clock, e.after);
    self.info.started_unix_ms = unix_time_ms();
    local::rewrite_entry(q, entry->fd(), self);
    auto entry_path = q.path() / local::entry_name(true, self.ticket), lock_path = q.path() / "lock";
    int fd = entry->promote();
    entry.reset();
    ::fcntl(fd, F_SETFD, 0);  // not close-on-exec: the command inherits it (see inherited_fd())
    return local_permit(fd, std::move(entry_path), std::move(lock_path), self.ticket, inotify.release());
  };
  auto leave = [&](errc why) {
    const auto lock = q.lock_within(lock_patience);  // (without it, as entry_guard's destructor)
    entry->leave();
    return why;
  };
  // The limit's lock, waited for until the deadline (for ever without one), and at least 100 ms (a --timeout 0s run
  // that finds another run's step under way waits for it, as a --no-wait one does): std::nullopt when another process
  // held it all that time (a run stopped inside its critical section holds it until continued).
  const auto lock_by_deadline = [&]() -> std::optional<local::unique_fd> {
    if (!deadline) return q.lock();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - steady_clock::now());
    return q.lock_within(std::max(left, std::chrono::milliseconds(100)));
  };
  // Leaves the queue, then throws the error of a failed system call.
  auto leave_after = [&](int error, const std::string& what) -> admit::expected<local_permit, std::error_code> {
    leave(errc::cancelled);
    throw std::system_error(error, std::generic_category(), what);
  };

  wait_progress state;
  relevant_changes changes;  // set at each check: which events call for the next one
  const auto note_ahead = [&](const std::vector<local::entry_record>& live) {
    changes.self = self.ticket;
    changes.ahead = 0;
    for (const auto& r : live) {  // (in ticket order: the last one below this ticket)
      if (!r.holder && r.priority == self.priority && r.ticket < self.ticket) changes.ahead = r.ticket;
    }
  };
  std::optional<nanoseconds> rate_wait;  // how long after last_check time alone could admit it (evaluation::rate_wait)
  steady_clock::time_point last_check;   // when `state` and rate_wait were evaluated
  steady_clock::time_point last_poll;    // when the queue was last looked at, in full or not (see the loop)
  {
    const auto lock = lock_by_deadline();
    if (!lock) return std::make_error_code(std::errc::resource_unavailable_try_again);
    auto live = local::scan_live(q);
    for (const auto& r : live) {
      if (r.definition && *r.definition != *self.definition) {
        throw definition_conflict(
            "the local limit " + quote(c.name) + " is in use with " + describe(*r.definition) + " (pid " +
            std::to_string(r.info.pid) + " on " + r.info.host + ": " + r.info.command + "), not " +
            describe(*self.definition) +
            ": every admit run of one name gives the same --concurrency, --rate, --burst and --classes "
            "while any of them runs or waits");
      }
    }
    last_check = last_poll = steady_clock::now();
    self.ticket = local::next_ticket(q, live);
    self.info.started_unix_ms = unix_time_ms();
    entry.emplace(q, local::create_entry(q, self), self.ticket);
    live.push_back(self);
    local::evaluation e = local::evaluate(q, c, plan_, live, self.ticket);
    if (e.admit) return admit_now(e);
    state = e.progress;
    rate_wait = e.rate_wait;
    note_ahead(live);
    if (no_wait || (c.max_waiters && state.waiting > *c.max_waiters)) {
      entry->leave();
      return no_wait ? errc::would_block : errc::queue_full;
    }
    // As admit::admission: a deadline the rate cannot meet (the tokens of this class's waiters ahead and its own are
    // not there by then, whatever else happens) fails at once.
    if (deadline) {
      const auto left = std::chrono::duration_cast<nanoseconds>(*deadline - steady_clock::now()).count();
      if (detail::admission_impossible_by(plan_.global, e.after.tat, detail::sat_add(e.ahead, c.weight), e.clock.now_ns,
                                          detail::sat_add(e.clock.now_ns, left))) {
        entry->leave();
        return errc::timeout;
      }
    }
  }

  // Without a watch (the user's inotify instances or watches are used up: fs.inotify.max_user_instances, 128 by
  // default, and many waiters), the wait still works: it checks every poll_interval instead of at each change.
  inotify = local::unique_fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify && ::inotify_add_watch(inotify.get(), q.path().c_str(),
                                     IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    inotify.reset();
  }
  local::unique_fd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return leave_after(errno, "local limit: eventfd");
  std::stop_callback on_stop(stop, [fd = wake.get()] {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
  });

  auto last_report = steady_clock::now();
  progress_every = std::max(progress_every, nanoseconds(std::chrono::milliseconds(1)));
  if (progress) progress(state);
  wait_progress reported = state;
  // With a watch the events say what changed, and the re-check is only the backstop for one that could be missed.
  const nanoseconds interval = inotify ? std::max(c.poll_interval, c.watched_poll_interval) : c.poll_interval;
  for (bool first = true;; first = false) {
    auto now = steady_clock::now();
    nanoseconds timeout = last_poll + interval - now;
    if (rate_wait) timeout = std::min(timeout, last_check + *rate_wait - now);
    if (deadline) timeout = std::min<nanoseconds>(timeout, *deadline - now);
    if (progress) timeout = std::min(timeout, last_report + progress_every - now);
    // The first round checks at once: what changed between the first check and the watch left no event.
    bool relevant = first || wait_for_events(inotify.get(), wake.get(), timeout, changes);
    if (stop.stop_requested()) return leave(errc::cancelled);
    now = steady_clock::now();
    bool expired = deadline && now >= *deadline;
    const bool rate_due = rate_wait && now >= last_check + *rate_wait;
    bool due = now >= last_poll + interval || rate_due;
    // Without a watch, a waiter behind its class's head looks only at the one right ahead of it between full checks
    // (one file instead of the whole queue: a crowd of such waiters polling every poll_interval cost the square of
    // its size), and checks in full when that one has gone, or every watched_poll_interval.
    if (due && !rate_due && !relevant && !expired && !inotify && changes.ahead != 0 &&
        now < last_check + c.watched_poll_interval && local::waiter_alive(q, changes.ahead)) {
      last_poll = now;
      due = false;
    }
    if (relevant || due || expired) {
      const auto lock = lock_by_deadline();
      if (!lock) {
        entry->leave();  // (without the lock, as entry_guard's destructor)
        return std::make_error_code(std::errc::resource_unavailable_try_again);
      }
      last_check = last_poll = steady_clock::now();
      auto live = local::scan_live(q);
      if (std::none_of(live.begin(), live.end(), [&](const auto& r) { return r.ticket == self.ticket; })) {
        // Someone removed the file (or the directory) by hand: this wait cannot be admitted any more.
        throw std::system_error(ENOENT, std::generic_category(),
                                "the queue entry \"" + (q.path() / local::entry_name(false, self.ticket)).string() +
                                    "\" was removed while waiting");
      }
      local::evaluation e = local::evaluate(q, c, plan_, live, self.ticket);
      if (e.admit) return admit_now(e);
      if (expired) {
        entry->leave();
        return errc::timeout;
      }
      state = e.progress;
      rate_wait = e.rate_wait;
      note_ahead(live);
    }
    if (progress && (!same_state(state, reported) || now >= last_report + progress_every)) {
      // The rate's wait as of now: the check that measured it may be up to poll_interval old.
      wait_progress shown = state;
      if (shown.rate_wait) shown.rate_wait = std::max(nanoseconds(0), *shown.rate_wait - (now - last_check));
      progress(shown);
      reported = state;
      last_report = now;
    }
  }
}

limit_definition local_limit::definition() const {
  limit_definition d;
  d.capacity = config_.capacity;
  if (config_.interval) {
    d.interval_ns = config_.interval->count();
    d.burst = config_.burst;
  }
  d.classes = config_.classes;
  return d;
}

bool limit_definition::operator==(const limit_definition& o) const noexcept {
  return capacity == o.capacity && interval_ns == o.interval_ns && burst == o.burst &&
         std::equal(classes.begin(), classes.end(), o.classes.begin(), o.classes.end(),
                    [](const auto& a, const auto& b) { return a.name == b.name && a.share == b.share; });
}

std::string describe(const limit_definition& d) {
  std::string s;
  if (d.capacity > 0) s = "--concurrency " + std::to_string(d.capacity);
  if (d.interval_ns > 0) {
    if (!s.empty()) s += ' ';
    s += "--rate " + admit::rate::every(std::chrono::nanoseconds(d.interval_ns)).to_string() + " --burst " +
         std::to_string(d.burst);
  }
  if (!d.classes.empty()) s += " --classes " + classes_option(d.classes);
  return s;
}

local_inspection inspect_local(const std::filesystem::path& directory, const std::string& name) {
  check_local_name(name);
  local::queue_dir q(directory, name, false);
  local_inspection result;
  if (!q.exists()) return result;
  result.exists = true;
  const auto lock = q.lock_within(inspect_patience);
  if (!lock) {
    result.lock_held = q.path() / "lock";
    return result;
  }
  std::vector<local::entry_record> live = local::scan_live(q);
  for (auto& r : live) {
    if (r.definition && !result.definition) result.definition = r.definition;
    auto& to = r.holder ? result.snapshot.holders : result.snapshot.waiters;
    to.push_back({r.ticket, r.weight, r.priority, std::move(r.info)});
  }
  if (result.definition && result.definition->interval_ns > 0) {
    const auto plan = local::plan_of(*result.definition);
    const auto clock = local::read_clock();
    const double tokens =
        detail::token_bucket_tokens(plan.global, local::read_buckets(q, plan, clock).tat, clock.now_ns);
    result.tokens = static_cast<std::int64_t>(std::floor(std::max(tokens, 0.0)));
  }
  return result;
}

std::string host_name() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string();
}

std::int64_t unix_time_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t ns_since(std::int64_t unix_ms) noexcept {
  return std::max<std::int64_t>(0, unix_time_ms() - unix_ms) * 1'000'000;
}

std::filesystem::path default_lock_directory() {
  if (const char* d = std::getenv("ADMIT_LOCK_DIR"); d != nullptr && *d != '\0') return d;
  if (auto d = local::runtime_directory()) return *d;
  return local::per_user_tmp_directory();
}

}  // namespace admit::cli::run
