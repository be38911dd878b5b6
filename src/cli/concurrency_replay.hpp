// cli/concurrency_replay.hpp — `admit replay --algorithm concurrency`: a trace of requests, each with an arrival time
// and a duration, run through a concurrency limiter in virtual time (a discrete-event simulation).
//
//   # comment; blank lines are ignored
//   0.5 2          a request arriving at 0.5 s that holds its permit for 2 s once admitted
//   1.25 0.3 4     one that needs 4 permits at once for 0.3 s
//
// Each line is `<arrival seconds> <duration seconds> [n]`: both times are decimals with up to 9 fraction digits,
// parsed exactly into nanoseconds as in cli/trace.hpp (at most max_trace_seconds each); n is the permits the request
// needs (default 1, at most max_tokens_per_arrival). Arrivals never go back in time.
//
// The simulation drives the real engine, admit::detail::semaphore_state — the one under admit::semaphore and
// admit::concurrency_limiter — with its own semaphore_waiter nodes: an arrival calls begin_wait (granted at once,
// rejected at once with queue_full or exceeds_capacity, or queued); a grant arrives through the node's notify, which
// records it and schedules the request's completion; a completion releases the permits (handing them to the queue in
// FIFO order); a deadline calls cancel_wait, and the engine's answer decides between timeout and the grant. With a
// zero timeout a request never queues (as concurrency_limiter::acquire: try_acquire, else timeout). Nothing sleeps
// and no clock is read: one thread, events in time order.
//
// Simultaneous events are processed as: completions (releases), then deadlines, then arrivals in trace order. So a
// request whose deadline falls at the instant a permit is released gets it (as a real grant racing a timeout wins),
// and a permit released at t is free for a request arriving at t.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/replay.hpp"
#include "cli/trace.hpp"

namespace admit::cli {

inline constexpr std::string_view concurrency_algorithm_name = "concurrency";

// One line of a concurrency trace.
struct request {
  std::int64_t t_ns = 0;         // arrival, ns since the start of the trace
  std::int64_t duration_ns = 0;  // how long it holds its permits once admitted
  std::int64_t n = 1;            // permits it needs
  std::size_t line = 0;          // 1-based line number in the source

  friend bool operator==(const request&, const request&) = default;
};

// Reads a concurrency trace line by line; errors are trace_error naming the line and the offending text.
// Thread safety: none (one parser per thread).
class request_trace_parser {
 public:
  // The request on this line, or nullopt for a blank or comment-only line. Throws trace_error.
  std::optional<request> feed(std::string_view line);

 private:
  std::size_t line_ = 0;
  std::int64_t last_ns_ = 0;
  std::size_t last_line_ = 0;
};

// The most requests `admit replay --algorithm concurrency` reads: the simulation keeps each request, its outcome and
// the in-flight series in memory (about 250 bytes a request, so about 500 MB here) and refuses a longer trace.
inline constexpr std::size_t max_trace_requests = 2'000'000;

// Reads a whole trace. Throws trace_error, and on the line of request max_requests + 1 ("more than 2000000
// requests, ..."): reading stops there.
[[nodiscard]] std::vector<request> read_requests(std::istream& in, std::size_t max_requests = max_trace_requests);
[[nodiscard]] std::vector<request> read_requests(std::string_view text);

// The limiter replayed.
struct concurrency_settings {
  std::int64_t limit = 1;                           // permits in flight at most (1 to max_tokens_per_arrival)
  std::optional<std::int64_t> max_waiters;          // nullopt: unbounded
  std::optional<std::chrono::nanoseconds> timeout;  // nullopt: no deadline; zero: never wait

  // "concurrency limit=4 max-waiters=10 timeout=500ms" (unset options are left out).
  [[nodiscard]] std::string describe() const;
};

enum class request_outcome { admitted, queue_full, timeout, exceeds_capacity };
// "admit", "queue-full", "timeout", "exceeds-capacity"
[[nodiscard]] std::string_view to_string(request_outcome o) noexcept;

// One request and what became of it.
struct request_event {
  std::int64_t t_ns = 0, duration_ns = 0, n = 1;
  request_outcome outcome = request_outcome::admitted;
  std::int64_t wait_ns = 0;  // admitted: from arrival to grant; timeout: the time it waited (the timeout)
};

// In flight and queued just after all the events at t_ns were processed (a change point of a step function).
struct concurrency_sample {
  std::int64_t t_ns = 0;
  std::int64_t in_flight = 0;  // permits held
  std::int64_t waiting = 0;    // requests queued
};

struct concurrency_result {
  std::vector<request_event> events;       // one per request, in trace order
  std::vector<concurrency_sample> series;  // from t = 0 (in flight 0, none waiting), one sample per event instant
  std::int64_t requests = 0, permits = 0;  // offered
  std::int64_t admitted = 0, admitted_at_once = 0, admitted_after_wait = 0;
  std::int64_t queue_full = 0, timed_out = 0, exceeds_capacity = 0;
  delay_stats wait;  // nearest-rank percentiles of the admitted requests' waits (0 for those admitted at once), exact
  std::int64_t peak_in_flight = 0, peak_waiting = 0;
  std::int64_t first_ns = 0, last_ns = 0;  // first and last arrival
  std::int64_t end_ns = 0;                 // the last event: the last completion (or deadline, or arrival)
};

// Runs the simulation. Throws std::invalid_argument for settings out of range (limit < 1, negative max_waiters or
// timeout) and std::logic_error if the engine ever broke its contract (more permits in flight than the limit, a node
// resolved twice) — a bug, never expected. Completion and deadline times saturate at the end of the int64 range.
[[nodiscard]] concurrency_result replay_concurrency(const concurrency_settings& settings,
                                                    std::span<const request> trace);

// Reports, in the shape of cli/report.hpp: the summary (with `comment`, each line starts with "# "), JSON (with the
// per-request events when `with_events`), one line per request: `<arrival> <duration> <n> <outcome> [<wait>]` (the
// wait when above zero).
void write_concurrency_summary(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                               const concurrency_result& result, bool comment = false);
void write_concurrency_json(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                            const concurrency_result& result, bool with_events);
void write_concurrency_events(std::ostream& out, const concurrency_result& result);

// The chart of --plot: permits in flight over time against the limit, and the queue length against max-waiters,
// with the queue-full rejections and timeouts marked. Bounded size: one step per horizontal pixel.
void write_concurrency_svg(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                           const concurrency_result& result);

}  // namespace admit::cli
