// admit_redis_semaphore_bench's minimal FIFO hand-off (impl "minimal-fifo", variant "async"; --minimal on): not a
// semaphore anyone should use, but the least a FIFO semaphore in Redis can do per cycle, to set admit's cycles cases
// against. Its code is a Redis function (FCALL, as admit's) with two operations and nothing else:
//   acquire: a permit if one is free (a counter), else the caller's id joins the tail of a list;
//   release: the head of the list gets the permit (its id is the reply), else the counter goes up.
// No leases, expiry, fencing tokens, waiter expiry, renewal, definitions, wake lists or failure handling: a waiter
// learns of its grant from the releasing call's reply, which only works because every contender lives in this one
// process. The contenders are admit's asynchronous ones (redis_semaphore_async_cycles.cpp) — chains of completion
// handlers on the connection's io thread, each call its own FCALL on the one connection — so the difference between
// the two rows is admit's semaphore itself: its script's work and its client's.
#include <boost/asio/post.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admit/redis/client/script.hpp"
#include "redis_semaphore_bench.hpp"

namespace admit::bench::semaphore_bench {

namespace {

// KEYS[1] the free permits (absent: ARGV[3], the capacity), KEYS[2] the queue of ids. ARGV[1] 'a' or 'r', ARGV[2]
// the caller's id. Replies: acquire 1 (granted) or 0 (queued); release the id granted, or '' (none waited).
const admit::redis::script& minimal_fifo() {
  static const admit::redis::script s = admit::redis::script::library("admit_bench_minimal_fifo", R"lua(
local function call(KEYS, ARGV)
  local free = tonumber(redis.call('GET', KEYS[1]) or ARGV[3])
  if ARGV[1] == 'a' then
    if free > 0 then
      redis.call('SET', KEYS[1], free - 1)
      return 1
    end
    redis.call('RPUSH', KEYS[2], ARGV[2])
    return 0
  end
  local head = redis.call('LPOP', KEYS[2])
  if head then return head end
  redis.call('SET', KEYS[1], free + 1)
  return ''
end
)lua");
  return s;
}

// Every member runs on the io thread.
class minimal_fifo_run {
 public:
  minimal_fifo_run(admit::redis::connection& conn, const std::string& name, const cycles_case& c,
                   clock_type::time_point from, clock_type::time_point until, cycles_tally& tally)
      : conn_(conn),
        keys_{"{" + name + "}:free", "{" + name + "}:queue"},
        capacity_(std::to_string(c.capacity)),
        window_{from, until},
        tally_(tally) {}

  void start(std::size_t i) { acquire(i); }
  // From now on every contender ends its chain after its current step (the waits still queued are never granted);
  // `done` is set once no call is in flight.
  void stop(std::promise<void>& done) {
    stopped_ = &done;
    if (in_flight_ == 0) done.set_value();
  }

 private:
  void acquire(std::size_t i) {
    if (stopped_ != nullptr) return;
    const auto t0 = clock_type::now();
    std::string id = std::to_string(i);
    call({"a", id, capacity_}, [this, i, t0, id](const admit::redis::reply& r) {
      if (r.integer() == 1) return hold(i, t0);
      queued_[id] = {i, t0};  // granted by a release's reply
    });
  }
  void hold(std::size_t i, clock_type::time_point t0) {
    const auto t1 = clock_type::now();
    if (window_.contains(t1)) tally_.acquire_ns[i].push_back(ns(t1 - t0));
    if (stopped_ == nullptr) release(i, t1);
  }
  void release(std::size_t i, clock_type::time_point t1) {
    call({"r", std::to_string(i), capacity_}, [this, i, t1](const admit::redis::reply& r) {
      const auto t2 = clock_type::now();
      if (window_.contains(t2)) {
        ++tally_.cycles[i];
        tally_.release_ns[i].push_back(ns(t2 - t1));
      }
      if (!r.str().empty()) {
        const auto w = queued_.extract(r.str());
        if (w.empty()) return tally_.add_error("release: granted an unknown id " + r.str());
        hold(w.mapped().first, w.mapped().second);
      }
      acquire(i);
    });
  }
  // One FCALL; `then(reply)` runs when it succeeded, else the error is counted and the contender's chain ends.
  template <class Then>
  void call(std::vector<std::string> args, Then then) {
    ++in_flight_;
    admit::redis::async_evalsha(conn_, minimal_fifo(), keys_, args,
                                [this, then = std::move(then)](boost::system::error_code ec, admit::redis::reply r) {
                                  if (ec) {
                                    tally_.add_error(ec.message());
                                  } else if (r.is_error()) {
                                    tally_.add_error(r.str());
                                  } else {
                                    then(r);
                                  }
                                  if (--in_flight_ == 0 && stopped_ != nullptr) stopped_->set_value();
                                });
  }

  admit::redis::connection& conn_;
  std::vector<std::string> keys_;
  std::string capacity_;
  window window_;
  cycles_tally& tally_;
  std::unordered_map<std::string, std::pair<std::size_t, clock_type::time_point>> queued_;  // id -> (index, call)
  int in_flight_ = 0;
  std::promise<void>* stopped_ = nullptr;
};

}  // namespace

void run_minimal_fifo_cycles(const settings& s, const cycles_case& c, int repetition) {
  io_thread io;
  admit::redis::connection conn(io.executor(), connection_options(s));
  connect_or_exit(conn, s);
  const std::string name =
      case_name(s, "minimal-" + std::to_string(c.contenders) + "x" + std::to_string(c.capacity), repetition);
  const auto from = clock_type::now() + seconds(s.warmup_s);
  const auto until = from + seconds(s.duration_s);
  cycles_tally tally(c.contenders);
  minimal_fifo_run run(conn, name, c, from, until, tally);
  asio::post(io.executor(), [&] {
    for (std::size_t i = 0; i < static_cast<std::size_t>(c.contenders); ++i) run.start(i);
  });
  {
    const progress_writer progress(io.executor(), tally, s.progress_file);
    std::this_thread::sleep_until(until);
  }
  std::promise<void> idle;
  asio::post(io.executor(), [&] { run.stop(idle); });
  idle.get_future().wait();
  report_cycles(s, c, repetition, "async" + s.tag, "minimal-fifo cycles", std::move(tally), "minimal-fifo");
}

}  // namespace admit::bench::semaphore_bench
