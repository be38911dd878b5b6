// cli/run/local_limit.cpp — the host-local limit of `admit run`: admission and waiting (the files: local_queue.cpp).
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

#include "admit/admission_options.hpp"
#include "admit/detail/admission_classes.hpp"
#include "admit/detail/admission_rule.hpp"
#include "admit/errc.hpp"
#include "admit/rate.hpp"
#include "cli/common/local_queue.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"

namespace admit::cli::run {

namespace {

using std::chrono::nanoseconds;
using std::chrono::steady_clock;

[[noreturn]] void invalid(const std::string& message) { throw std::invalid_argument("local limit: " + message); }

// The limit as admit::admission's plan (admit/detail/admission_classes.hpp): the global token bucket, and each class's
// guaranteed permits and assured bucket.
detail::admission_plan plan_of(const limit_definition& d) {
  admit::admission_options o;
  if (d.interval_ns > 0) {
    o.rate = admit::rate::every(nanoseconds(d.interval_ns));
    o.burst = d.burst;
  }
  o.max_in_flight = d.capacity;
  o.classes = d.classes;
  return detail::plan_admission_classes(o, 0);
}

// The rate state (under `lock`) in the token bucket's representation, read from `rate` at `clock`. States this
// definition cannot have made at this boot's clock (a slower rate's, before the definition changed; a clock
// namespace; a damaged file) are clamped: the global bucket is never emptier than empty, a class's bucket never owes
// more than one request's tokens (the most it can be charged in debt). A clamped state must be written back at once
// (write_buckets): the clamp is relative to now, so read again later it would never refill.
struct bucket_state {
  std::int64_t tat = detail::ns_min;  // the global bucket; ns_min: full
  std::vector<std::int64_t> assured;  // each class's assured bucket
  bool clamped = false;
};
bucket_state read_buckets(const local::queue_dir& q, const detail::admission_plan& plan,
                          const local::clock_reading& clock) {
  bucket_state b;
  b.assured.assign(plan.classes.size(), detail::ns_min);
  if (plan.global.inf()) return b;
  const auto stored = local::read_rate(q, clock.boot_id);
  if (!stored) return b;
  b.tat = detail::sat_sub(stored->tat_ns, plan.global.tol);
  b.clamped = b.tat > clock.now_ns;
  b.tat = std::min(b.tat, clock.now_ns);
  if (stored->assured_tat_ns.size() == plan.classes.size()) {
    for (std::size_t k = 0; k < b.assured.size(); ++k) {
      const auto& assured = plan.classes[k].assured;
      const std::int64_t most = detail::sat_add(clock.now_ns, detail::token_bucket_cost(assured, plan.global.burst));
      b.clamped = b.clamped || stored->assured_tat_ns[k] > most;
      b.assured[k] = std::min(stored->assured_tat_ns[k], most);
    }
  }
  return b;
}

// Under `lock`: stores the rate state (with classes, their buckets too).
void write_buckets(const local::queue_dir& q, const detail::admission_plan& plan, const local::clock_reading& clock,
                   const bucket_state& b) {
  local::stored_rate r{detail::sat_add(b.tat, plan.global.tol), {}};
  if (plan.classes.size() > 1) r.assured_tat_ns = b.assured;
  local::write_rate(q, clock.boot_id, r);
}

// The outcome of one admission check (under `lock`).
struct evaluation {
  bool admit = false;
  wait_progress progress;
  bucket_state after;  // the rate state read; with admit, the state to store
  local::clock_reading clock;
  std::int64_t ahead = 0;  // the permits its class's waiters ahead of it ask for
  // Waiting: how long until time alone could admit it (its tokens), when it is the head of its class.
  std::optional<nanoseconds> rate_wait;
};

// Whether the waiter `self` (in class `cls`) may be admitted now, given the live entries `live` (self among them): the
// share rule of admit::admission (admit/detail/admission_rule.hpp) on the heads of the classes' queues, the tickets
// being the arrival order. Only the picked head admits itself; every other waiter is woken by the change that
// admission makes (or its own token time) and looks again.
evaluation evaluate(const local::queue_dir& q, const local_limit_config& c, const detail::admission_plan& plan,
                    const std::vector<local::entry_record>& live, std::uint64_t self) {
  evaluation e;
  e.progress.capacity = c.capacity;
  const std::size_t classes = plan.classes.size();
  std::vector<detail::admission_class_state> standing(classes);
  std::vector<std::int64_t> queued(classes, 0);
  std::vector<const local::entry_record*> heads(classes, nullptr);
  for (const auto& r : live) {
    const std::size_t k = r.priority < classes ? r.priority : 0;
    if (r.holder) {
      e.progress.held += r.weight;
      standing[k].held += r.weight;
      continue;
    }
    ++e.progress.waiting;
    queued[k] += r.weight;
    if (heads[k] == nullptr) heads[k] = &r;
    if (k == c.priority && r.ticket < self) e.ahead += r.weight;
    if (k == c.priority && r.ticket <= self) ++e.progress.position;
  }
  e.clock = local::read_clock();
  e.after = read_buckets(q, plan, e.clock);
  if (e.after.clamped) write_buckets(q, plan, e.clock, e.after);
  if (e.progress.position != 1) return e;
  const std::int64_t t = e.clock.now_ns;
  const bool sole = detail::admission_sole(plan);
  const detail::admission_free free{c.capacity > 0, c.capacity - e.progress.held, &plan.global, e.after.tat, t};
  std::vector<detail::admission_head> stands(classes);
  for (std::size_t k = 0; k < classes; ++k) {
    standing[k].guaranteed = plan.classes[k].permits;
    standing[k].assured = sole ? nullptr : &plan.classes[k].assured;
    standing[k].assured_tat = e.after.assured[k];
    if (heads[k] != nullptr) {
      stands[k] = detail::admission_stand(standing[k], heads[k]->weight, heads[k]->ticket, queued[k], free);
    }
  }
  if (detail::admission_pick(stands, free) != c.priority) {
    const std::int64_t wait = detail::admission_head_wait(plan.global, e.after.tat, plan.classes[c.priority].assured,
                                                          e.after.assured[c.priority], t, c.weight);
    if (wait != detail::ns_max) e.rate_wait = nanoseconds(wait);
    // Reported as waiting for the rate only when, tokens aside, the rule would pick it now: with the infinite rate
    // (every head's tokens there), the heads' claims on permits still count.
    if (e.rate_wait && !plan.global.inf()) {
      const detail::token_bucket_config tokens_aside;  // cost1 0: the infinite rate
      detail::admission_free permits_only = free;
      permits_only.global = &tokens_aside;
      for (auto& h : stands) h.tokens_free = h.token_entitled = true;
      if (detail::admission_pick(stands, permits_only) == c.priority) e.progress.rate_wait = e.rate_wait;
    }
    return e;
  }
  if (!plan.global.inf()) {
    e.after.tat =
        detail::token_bucket_step(plan.global, admit::oversize_policy::reject, e.after.tat, t, c.weight).new_tat;
  }
  const auto& k = standing[c.priority];
  e.after.assured[c.priority] =
      detail::admission_assured_after(k.assured, k.assured_tat, stands[c.priority], t, c.weight);
  e.admit = true;
  return e;
}

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
    try {
      auto lock = q_.lock();
      leave();
    } catch (...) {
      leave();  // without `lock`: the entry, unlocked by the close, is removed by the next reader if still there
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

// Waits for an event on `fds` or `timeout` (`inotify_fd` -1: no watch, poll() skips it). Returns whether an inotify
// event names an entry (or the queue overflowed).
bool wait_for_events(int inotify_fd, int event_fd, nanoseconds timeout) {
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
      // Only entries matter: `lock`, `sequence` and `rate` are opened by every check (and would wake everyone).
      if (ev->len > 2 && (ev->name[0] == 'w' || ev->name[0] == 'h') && ev->name[1] == '.') relevant = true;
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
  if (c.classes.size() == 1) invalid("one class is the limit itself: give two classes or none");
  if (c.priority >= std::max<std::size_t>(1, c.classes.size())) {
    invalid("class " + std::to_string(c.priority) + " is out of range: " +
            (c.classes.empty()
                 ? std::string("0 without classes")
                 : "0 to " + std::to_string(c.classes.size() - 1) + " (" + classes_option(c.classes) + ")"));
  }
  plan_ = plan_of(definition());  // std::invalid_argument naming the value, as admit::admission's constructor
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
  auto admit_now = [&](const evaluation& e) {
    if (!plan_.global.inf()) write_buckets(q, plan_, e.clock, e.after);
    self.info.started_unix_ms = unix_time_ms();
    local::rewrite_entry(q, entry->fd(), self);
    auto entry_path = q.path() / local::entry_name(true, self.ticket), lock_path = q.path() / "lock";
    int fd = entry->promote();
    entry.reset();
    ::fcntl(fd, F_SETFD, 0);  // not close-on-exec: the command inherits it (see inherited_fd())
    return local_permit(fd, std::move(entry_path), std::move(lock_path), self.ticket, inotify.release());
  };
  auto leave = [&](errc why) {
    auto lock = q.lock();
    entry->leave();
    return why;
  };
  // Leaves the queue, then throws the error of a failed system call.
  auto leave_after = [&](int error, const std::string& what) -> admit::expected<local_permit, std::error_code> {
    leave(errc::cancelled);
    throw std::system_error(error, std::generic_category(), what);
  };

  wait_progress state;
  std::optional<nanoseconds> rate_wait;  // how long after last_check time alone could admit it (evaluation::rate_wait)
  steady_clock::time_point last_check;   // when `state` and rate_wait were evaluated
  {
    auto lock = q.lock();
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
    last_check = steady_clock::now();
    self.ticket = local::next_ticket(q, live);
    self.info.started_unix_ms = unix_time_ms();
    entry.emplace(q, local::create_entry(q, self), self.ticket);
    live.push_back(self);
    evaluation e = evaluate(q, c, plan_, live, self.ticket);
    if (e.admit) return admit_now(e);
    state = e.progress;
    rate_wait = e.rate_wait;
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
  for (bool first = true;; first = false) {
    auto now = steady_clock::now();
    nanoseconds timeout = last_check + c.poll_interval - now;
    if (rate_wait) timeout = std::min(timeout, last_check + *rate_wait - now);
    if (deadline) timeout = std::min<nanoseconds>(timeout, *deadline - now);
    if (progress) timeout = std::min(timeout, last_report + progress_every - now);
    // The first round checks at once: what changed between the first check and the watch left no event.
    bool relevant = first || wait_for_events(inotify.get(), wake.get(), timeout);
    if (stop.stop_requested()) return leave(errc::cancelled);
    now = steady_clock::now();
    bool expired = deadline && now >= *deadline;
    bool due = now >= last_check + c.poll_interval || (rate_wait && now >= last_check + *rate_wait);
    if (relevant || due || expired) {
      auto lock = q.lock();
      last_check = steady_clock::now();
      auto live = local::scan_live(q);
      if (std::none_of(live.begin(), live.end(), [&](const auto& r) { return r.ticket == self.ticket; })) {
        // Someone removed the file (or the directory) by hand: this wait cannot be admitted any more.
        throw std::system_error(ENOENT, std::generic_category(),
                                "the queue entry \"" + (q.path() / local::entry_name(false, self.ticket)).string() +
                                    "\" was removed while waiting");
      }
      evaluation e = evaluate(q, c, plan_, live, self.ticket);
      if (e.admit) return admit_now(e);
      if (expired) {
        entry->leave();
        return errc::timeout;
      }
      state = e.progress;
      rate_wait = e.rate_wait;
    }
    if (progress && (!same_state(state, reported) || now >= last_report + progress_every)) {
      progress(state);
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
  auto lock = q.lock();
  std::vector<local::entry_record> live = local::scan_live(q);
  for (auto& r : live) {
    if (r.definition && !result.definition) result.definition = r.definition;
    auto& to = r.holder ? result.snapshot.holders : result.snapshot.waiters;
    to.push_back({r.ticket, r.weight, r.priority, std::move(r.info)});
  }
  if (result.definition && result.definition->interval_ns > 0) {
    const auto plan = plan_of(*result.definition);
    const auto clock = local::read_clock();
    const double tokens = detail::token_bucket_tokens(plan.global, read_buckets(q, plan, clock).tat, clock.now_ns);
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
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d != nullptr && *d != '\0') {
    return std::filesystem::path(d) / "admit";
  }
  return std::filesystem::path("/tmp") / ("admit-" + std::to_string(::getuid()));
}

}  // namespace admit::cli::run
