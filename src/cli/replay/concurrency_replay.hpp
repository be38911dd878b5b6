// cli/replay/concurrency_replay.hpp — `admit replay --algorithm concurrency`: a trace of requests, each with an arrival
// time and a duration, run through a concurrency limiter in virtual time (a discrete-event simulation).
//
//   # comment; blank lines are ignored
//   0.5 2          a request arriving at 0.5 s that holds its permit for 2 s once admitted
//   1.25 0.3 4     one that needs 4 permits at once for 0.3 s
//
// Each line is `<arrival seconds> <duration seconds> [n]`: both times are decimals with up to 9 fraction digits,
// parsed exactly into nanoseconds as in cli/replay/trace.hpp (at most max_trace_seconds each); n is the permits the
// request needs (default 1, at most max_tokens_per_arrival). Arrivals never go back in time.
//
// The simulation drives the real engine, admit::detail::semaphore_state — the one under admit::semaphore and
// admit::concurrency_limiter — with its own semaphore_waiter nodes: an arrival calls begin_wait (granted at once,
// rejected at once with queue_full or exceeds_capacity, or queued); a grant arrives through the node's notify, which
// records it and schedules the request's completion; a completion releases the permits (handing them to the queue in
// FIFO order); a deadline calls cancel_wait, and the engine's answer decides between timeout and the grant. With a
// zero timeout a request never queues (as concurrency_limiter::acquire: try_acquire, else timeout). Nothing sleeps
// and no clock is read: one thread, events in time order. The replay streams (concurrency_replayer): each request
// is replayed as it is read, and only the live ones (holding permits or waiting) are kept.
//
// Simultaneous events are processed as: completions (releases), then deadlines, then arrivals in trace order. So a
// request whose deadline falls at the instant a permit is released gets it (as a real grant racing a timeout wins),
// and a permit released at t is free for a request arriving at t.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/replay/concurrency_timeline.hpp"
#include "cli/replay/replay.hpp"
#include "cli/replay/trace.hpp"

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

// Reads a whole trace into memory (tests and small inputs; the replay itself streams, see replay_concurrency).
// Throws trace_error.
[[nodiscard]] std::vector<request> read_requests(std::istream& in);
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

struct concurrency_result {
  std::vector<request_event> events;       // only from replay_concurrency(settings, trace): one per request, in order
  concurrency_timeline timeline;           // in flight and waiting over time, for the chart (bounded size)
  std::int64_t requests = 0, permits = 0;  // offered
  double total_duration_ns = 0;            // the offered requests' durations, summed in trace order
  std::int64_t admitted = 0, admitted_at_once = 0, admitted_after_wait = 0;
  std::int64_t queue_full = 0, timed_out = 0, exceeds_capacity = 0;
  delay_stats wait;        // nearest-rank percentiles of the admitted requests' waits (0 for those admitted at once)
  bool wait_exact = true;  // false: from delay_percentiles' histogram (within 1/256, never below)
  std::int64_t peak_in_flight = 0, peak_waiting = 0;
  std::int64_t first_ns = 0, last_ns = 0;  // first and last arrival
  std::int64_t end_ns = 0;                 // the last event: the last completion (or deadline, or arrival)
  std::int64_t skipped_lines = 0;          // set by the reader of an access log: lines it left out (--skip-bad-lines)
  std::int64_t reordered = 0;              // ... and arrivals earlier than the one before, replayed at its time
};

// The simulation, fed one request at a time in arrival order: it replays in virtual time everything that happens
// before each arrival as the arrival comes in, and keeps state only for live requests. Memory, whatever the trace:
//   - one node (about 100 bytes) per request waiting for permits, freed when it is granted or times out;
//   - one timed event (48 bytes) per request holding permits, and one per request that queued within the last
//     timeout (a deadline stays queued until its time even when the request was granted before it);
//   - with an event sink, a reorder buffer (56 bytes a request) from the oldest request whose outcome is not yet
//     known to the newest arrival, so that events leave in arrival order as soon as they are decided;
//   - the wait percentiles (cli/replay/delay_percentiles.hpp): 8 bytes per request admitted after waiting up to
//     1,048,576 of them (exact), then a fixed histogram of 115 KB (within 1/256, never below); nothing for the others;
//   - the timeline, about 100 KB.
// Thread safety: none (one replay per thread). A sink that throws leaves the replayer unusable.
class concurrency_replayer {
 public:
  using event_sink = std::function<void(const request_event&)>;

  // Throws std::invalid_argument for settings out of range (limit < 1, negative max_waiters or timeout).
  explicit concurrency_replayer(const concurrency_settings& settings, event_sink on_event = {});
  ~concurrency_replayer();
  concurrency_replayer(const concurrency_replayer&) = delete;
  concurrency_replayer& operator=(const concurrency_replayer&) = delete;

  // Replays everything due up to r.t_ns, then r's arrival. Throws std::invalid_argument if r arrives before the
  // previous request (the parser already refuses that).
  void add(const request& r);
  // Replays the rest (every request ends: admitted requests complete, waiters are granted or time out) and returns
  // the result; call once. Throws std::logic_error if the engine ever broke its contract (see replay_concurrency).
  [[nodiscard]] concurrency_result finish();

  // What the replay holds now and held at most, for tests of its memory bound.
  struct footprint {
    std::size_t nodes = 0, peak_nodes = 0;      // waiter nodes allocated (free ones are reused)
    std::size_t timed = 0, peak_timed = 0;      // pending completions and deadlines
    std::size_t pending = 0, peak_pending = 0;  // reorder buffer of the event sink
    std::size_t waits = 0;                      // waits kept exactly for the percentiles (0 once in the histogram)
  };
  [[nodiscard]] footprint memory() const noexcept;

 private:
  class simulation;
  std::unique_ptr<simulation> sim_;
};

// Reads the trace line by line and replays it as it goes (see concurrency_replayer), handing each request's event
// to `on_event` in trace order as soon as it is decided. Throws trace_error (events before the bad line have been
// handed out by then) and what concurrency_replayer throws.
[[nodiscard]] concurrency_result replay_concurrency(const concurrency_settings& settings, std::istream& trace,
                                                    const concurrency_replayer::event_sink& on_event = {});

// Runs the simulation. Throws std::invalid_argument for settings out of range (limit < 1, negative max_waiters or
// timeout) and std::logic_error if the engine ever broke its contract (more permits in flight than the limit, a node
// resolved twice) — a bug, never expected; clock_range_error for a request that would end past the end of the int64
// range of nanoseconds (deadlines saturate there: a deadline that far never comes).
// The events are kept in the result (for tests and small traces).
[[nodiscard]] concurrency_result replay_concurrency(const concurrency_settings& settings,
                                                    std::span<const request> trace);

// Reports, in the shape of cli/replay/report.hpp: the summary (with `comment`, each line starts with "# "), JSON (with
// the per-request events when `with_events`), one line per request: `<arrival> <duration> <n> <outcome> [<wait>]` (the
// wait when above zero).
void write_concurrency_summary(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                               const concurrency_result& result, bool comment = false);
void write_concurrency_json(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                            const concurrency_result& result, bool with_events);
void write_concurrency_events(std::ostream& out, const concurrency_result& result);
// One line of write_concurrency_events, with its newline.
[[nodiscard]] std::string format_concurrency_event(const request_event& e);
// One element of the JSON "events" array, as write_concurrency_json writes it (indented for its place, no comma).
[[nodiscard]] std::string format_concurrency_event_json(const request_event& e);
// write_concurrency_json with the events written by `write_events`: the result's requests, as elements made by
// format_concurrency_event_json joined by ",\n" (so a long replay can keep them in a file, not in memory).
void write_concurrency_json(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                            const concurrency_result& result, const std::function<void(std::ostream&)>& write_events);

// The chart of --plot: permits in flight over time against the limit, and the queue length against max-waiters,
// with the queue-full rejections and timeouts marked. Bounded size: one step per horizontal pixel, each the peak
// over the timeline's buckets whose middle falls in the pixel (see cli/replay/concurrency_timeline.hpp).
void write_concurrency_svg(std::ostream& out, const concurrency_settings& settings, const std::string& source,
                           const concurrency_result& result);

}  // namespace admit::cli
