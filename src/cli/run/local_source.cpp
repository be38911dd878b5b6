// `admit run` on this host (see local_source.hpp).
#include "cli/run/local_source.hpp"

#include <chrono>
#include <string>
#include <system_error>

#include "admit/errc.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"

namespace admit::cli::run {

namespace {

class local_held final : public held_permit {
 public:
  explicit local_held(local_permit p) : permit_(std::move(p)) {}
  std::string lease_id() const override { return "local:" + std::to_string(permit_.ticket()); }
  std::int64_t fencing_token() const override { return static_cast<std::int64_t>(permit_.ticket()); }
  int inherited_fd() const override { return permit_.inherited_fd(); }
  release_result release() override {
    permit_.release();
    return {};
  }

 private:
  local_permit permit_;
};

class local_source final : public permit_source {
 public:
  // `timed_out`: what a run refused at the end of --timeout says (not_admitted_in_time).
  local_source(local_limit_config c, std::string timed_out) : limit_(std::move(c)), timed_out_(std::move(timed_out)) {}

  std::unique_ptr<held_permit> acquire(std::optional<std::chrono::steady_clock::time_point> deadline, bool no_wait,
                                       std::stop_token stop, const std::function<void(const wait_progress&)>& progress,
                                       bool /*status_line: reporting costs nothing here*/, refusal& why) override {
    admit::expected<local_permit, std::error_code> r = admit::errc::would_block;
    try {
      r = limit_.acquire(deadline, no_wait, stop, progress);
    } catch (const definition_conflict& e) {
      why.error = std::make_error_code(std::errc::invalid_argument);
      why.message = e.what();
      why.reason = "definition";
      why.exit_status = exit_bad_input;
      return nullptr;
    }
    if (r) return std::make_unique<local_held>(std::move(*r));
    why.error = r.error();
    why.message = describe(r.error());
    why.exit_status = r.error() == admit::errc::exceeds_capacity ? exit_bad_input : exit_not_admitted;
    return nullptr;
  }

 private:
  std::string describe(std::error_code e) const {
    const auto& c = limit_.config();
    const std::string where = quote(c.name) + " on this host";
    if (e == admit::errc::queue_full) {
      return queue_full_message(*c.max_waiters, where);
    }
    if (e == admit::errc::would_block) return "not admitted: " + where + " is busy (--no-wait)";
    if (e == admit::errc::timeout) return timed_out_;
    if (e == std::errc::resource_unavailable_try_again) {
      const std::string lock = (c.directory / c.name / "lock").string();
      return timed_out_ + ": another process held the limit's lock " + quote(lock) +
             " all that time (a stopped `admit run`, Ctrl-Z or SIGSTOP, holds it until continued; `fuser -v " +
             quote(lock) + "` names it)";
    }
    if (e == admit::errc::cancelled) return "not admitted: stopped while waiting for " + where;
    return "not admitted: " + e.message();
  }

  local_limit limit_;
  std::string timed_out_;
};

}  // namespace

std::unique_ptr<permit_source> make_local_source(const run_settings& s, const entry_info& info) {
  local_limit_config c;
  c.directory = s.lock_directory;
  c.name = s.name;
  c.capacity = s.concurrency;
  c.weight = s.weight;
  if (s.rate) {
    c.interval = std::chrono::nanoseconds(static_cast<std::int64_t>(s.rate->interval_ns()));
    c.burst = s.burst;
  }
  c.classes = s.classes;
  c.priority = s.priority;
  c.max_waiters = s.max_waiters;
  c.info = info;
  return std::make_unique<local_source>(std::move(c), not_admitted_in_time(s, quote(s.name) + " on this host"));
}

}  // namespace admit::cli::run
