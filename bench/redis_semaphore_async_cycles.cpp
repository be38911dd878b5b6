// admit_redis_semaphore_bench's cycles cases with asynchronous contenders (variant "async"; see the top of
// redis_semaphore_bench.cpp): C contenders on the connection's one io thread, each an endless chain of
// async_acquire_for(10 s) and lease::async_release started from the previous step's completion handler. No thread
// waits: the io thread runs the connection and every contender, as an event loop runs its tasks (the references'
// contenders are async loops on one Node.js thread).
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "redis_semaphore_bench.hpp"

namespace admit::bench::semaphore_bench {

using namespace std::chrono_literals;

namespace {

// One contender. Every member runs on the io thread (its handlers' default executor: the connection's).
class async_contender {
 public:
  async_contender(admit::redis::semaphore& sem, std::size_t index, cycles_tally& tally, clock_type::time_point from,
                  clock_type::time_point until, std::function<void()> on_done)
      : sem_(sem), i_(index), tally_(tally), window_{from, until}, on_done_(std::move(on_done)) {}

  // Starts the next cycle, or ends the chain once stop() was called.
  void next() {
    if (stopping_) return on_done_();
    const auto t0 = clock_type::now();
    sem_.async_acquire_for(
        10s, 1, asio::bind_cancellation_slot(signal_.slot(), [this, t0](std::error_code ec, admit::redis::lease l) {
          const auto t1 = clock_type::now();
          if (ec) {
            if (ec != admit::errc::cancelled) tally_.add_error("acquire: " + ec.message());
            return next();
          }
          if (window_.contains(t1)) tally_.acquire_ns[i_].push_back(ns(t1 - t0));
          // The lease object may go once async_release has returned: the release is under way.
          l.async_release([this, t1](std::error_code e, admit::redis::lease::release_status status) {
            const auto t2 = clock_type::now();
            const bool ok = status == admit::redis::lease::release_status::released;
            if (!ok) tally_.add_error("release: " + (e ? e.message() : std::string("not held")));
            if (ok && window_.contains(t2)) {
              ++tally_.cycles[i_];
              tally_.release_ns[i_].push_back(ns(t2 - t1));
            }
            next();
          });
        }));
  }
  // Ends the chain after its current step; a wait still queued is cancelled (not an error).
  void stop() {
    stopping_ = true;
    signal_.emit(asio::cancellation_type::terminal);
  }

 private:
  admit::redis::semaphore& sem_;
  std::size_t i_;
  cycles_tally& tally_;
  window window_;
  std::function<void()> on_done_;
  asio::cancellation_signal signal_;
  bool stopping_ = false;
};

}  // namespace

// Runs on the contenders' thread: the timer's handler sums the cycles the contenders count there. The destructor
// stops it and waits until its handler has gone, so that the tally outlives every read.
struct progress_writer::state {
  state(boost::asio::any_io_executor ex, const cycles_tally& t, std::string f)
      : timer(std::move(ex)), tally(t), file(std::move(f)) {}
  void arm(const std::shared_ptr<state>& self) {
    timer.expires_after(100ms);
    timer.async_wait([self](boost::system::error_code ec) {
      if (ec || self->stopped) return self->gone.set_value();
      const std::uint64_t cycles =
          std::accumulate(self->tally.cycles.begin(), self->tally.cycles.end(), std::uint64_t{0});
      {
        std::ofstream out(self->file + ".new", std::ios::trunc);
        out << cycles << '\n';
      }
      std::error_code ignored;
      std::filesystem::rename(self->file + ".new", self->file, ignored);
      self->arm(self);
    });
  }
  boost::asio::steady_timer timer;
  const cycles_tally& tally;
  std::string file;
  bool stopped = false;  // on the timer's thread
  std::promise<void> gone;
};

progress_writer::progress_writer(boost::asio::any_io_executor ex, const cycles_tally& t, std::string file) {
  if (file.empty()) return;
  state_ = std::make_shared<state>(ex, t, std::move(file));
  asio::post(ex, [s = state_] { s->arm(s); });
}

progress_writer::~progress_writer() {
  if (!state_) return;
  auto gone = state_->gone.get_future();
  asio::post(state_->timer.get_executor(), [s = state_] {
    s->stopped = true;
    s->timer.cancel();
  });
  gone.wait();
}

void run_async_cycles(const settings& s, const cycles_case& c, int repetition) {
  io_thread io;
  admit::redis::connection conn(io.executor(), connection_options(s));
  connect_or_exit(conn, s);
  admit::redis::semaphore sem(
      conn, case_name(s, "async-cycles-" + std::to_string(c.contenders) + "x" + std::to_string(c.capacity), repetition),
      c.capacity, semaphore_options(s));

  const auto from = clock_type::now() + seconds(s.warmup_s);
  const auto until = from + seconds(s.duration_s);
  cycles_tally tally(c.contenders);
  for (auto& v : tally.acquire_ns) v.reserve(1 << 16);
  for (auto& v : tally.release_ns) v.reserve(1 << 16);
  std::promise<void> all_done;
  int running = c.contenders;  // on the io thread
  std::vector<std::unique_ptr<async_contender>> contenders;
  for (int i = 0; i < c.contenders; ++i) {
    contenders.push_back(std::make_unique<async_contender>(sem, static_cast<std::size_t>(i), tally, from, until, [&] {
      if (--running == 0) all_done.set_value();
    }));
  }
  asio::post(io.executor(), [&] {
    for (auto& k : contenders) k->next();
  });
  {
    const progress_writer progress(io.executor(), tally, s.progress_file);
    std::this_thread::sleep_until(until);
  }
  asio::post(io.executor(), [&] {
    for (auto& k : contenders) k->stop();
  });
  all_done.get_future().wait();
  // The last contender's handler may still be returning on the io thread: let it finish before the contenders go.
  std::promise<void> left;
  asio::post(io.executor(), [&left] { left.set_value(); });
  left.get_future().wait();
  report_cycles(s, c, repetition, variant(s, true), "admit async cycles", std::move(tally));
}

}  // namespace admit::bench::semaphore_bench
