// tests/redis/support/admit_run_testing.hpp — what the end-to-end tests of `admit run` (local and Redis) share: a
// temporary directory whose path holds a space, the commands `admit run` runs (this test binary again in a helper
// role, see self_exec.hpp: it records its start and end in a log, or queries a tiny "database"), the --json events
// read from standard error, the log's analysis, and the scenarios both backends must pass (FIFO with at most N at
// once). Every path goes to a program as an argument of its own (posix_spawn, or `sh -c SCRIPT sh ARGS...`), never
// inside a shell string.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "self_exec.hpp"

namespace admit::redis::testing::run {

using args = std::vector<std::string>;
using namespace std::chrono_literals;

// `a` followed by `more`.
inline args operator+(args a, const args& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Reads the child's outputs to their end and reaps it (see child_process::wait).
inline run_result finish(child_process& c, std::chrono::milliseconds limit = 60s) {
  run_result r;
  r.status = c.wait(limit);
  r.out = c.out();
  r.err = c.err();
  return r;
}

inline run_result run_to_end(const args& a, std::chrono::milliseconds limit = 60s) {
  child_process c(a);
  return finish(c, limit);
}

// A fresh directory "/tmp/admit run <random>" (a space in its path on purpose), removed with its content.
class temp_dir {
 public:
  temp_dir() {
    char name[] = "/tmp/admit run XXXXXX";
    if (::mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void touch(const std::string& path) { std::ofstream(path) << ""; }

// pred() polled every millisecond until true (true) or `limit` passes (false): waits for another process's progress,
// never for time to pass.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Whether process `pid` has ended (gone, or a zombie not yet reaped by its parent).
inline bool process_gone(std::int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string id, comm, state;
  return !(stat >> id >> comm >> state) || state == "Z";
}

inline std::int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// --json: the complete lines of standard error, each parsed (a line that is not a JSON object fails the test, and
// so does one without "event", "name" and "time_unix_ms").
inline std::vector<nlohmann::json> events(const std::string& err) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(err.substr(0, err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not one JSON object per line on stderr: " << line;
    if (!j.is_object()) continue;
    EXPECT_TRUE(j.contains("event") && j["event"].is_string()) << line;
    EXPECT_TRUE(j.contains("name") && j["name"].is_string()) << line;
    EXPECT_TRUE(j.contains("time_unix_ms") && j["time_unix_ms"].is_number_integer()) << line;
    out.push_back(j);
  }
  return out;
}

// The first event named `name` (a null JSON if none).
inline nlohmann::json event(const std::string& err, std::string_view name) {
  for (auto& e : events(err)) {
    if (e.value("event", "") == name) return e;
  }
  return nullptr;
}

// Waits until one of `names` is among the child's --json events (complete lines).
inline bool wait_for_event(child_process& c, std::initializer_list<std::string_view> names,
                           std::chrono::milliseconds limit = 30s) {
  return c.wait_for_stderr_until(
      [&](const std::string& err) {
        std::istringstream lines(err.substr(0, err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1));
        for (std::string line; std::getline(lines, line);) {
          const auto j = nlohmann::json::parse(line, nullptr, false);
          if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) continue;
          for (auto n : names) {
            if (j["event"].get<std::string>() == n) return true;
          }
        }
        return false;
      },
      limit);
}

// --- The commands `admit run` runs: this test binary in a role (each test file has TEST(AdmitRun<Kind>Child, Role))
// ---
//   record LOG LABEL HOLD   appends "start LABEL <CLOCK_MONOTONIC ns> <ADMIT_FENCING_TOKEN>" to LOG, holds, appends
//                           "end LABEL <ns>"; HOLD is a number of milliseconds, "term": until SIGTERM, or a path:
//                           until it exists
//   query PORT              connects to 127.0.0.1:PORT and reads to the end: exit 0 when it read "ok"
inline const std::string role_test = "AdmitRun*Child.Role";  // each test file has one, of its own name

inline args record_command(const std::string& log, const std::string& label, const std::string& hold) {
  return role_argv(role_test, {"record", log, label, hold});
}

[[noreturn]] inline void run_role(const std::vector<std::string>& a) {
  const auto append = [&](const std::string& line) {
    const int fd = ::open(a.at(1).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    // One write of a short line with O_APPEND: the lines of concurrent commands never interleave.
    if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::_Exit(3);
    ::close(fd);
  };
  if (a.at(0) == "record") {
    const char* token = std::getenv("ADMIT_FENCING_TOKEN");
    append("start " + a.at(2) + " " + std::to_string(monotonic_ns()) + " " + (token ? token : "-") + "\n");
    const std::string& hold = a.at(3);
    if (hold == "term") {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGTERM);
      int sig = 0;
      if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0 || ::sigwait(&set, &sig) != 0) std::_Exit(4);
    } else if (!hold.empty() && hold.find_first_not_of("0123456789") == std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoll(hold)));
    } else if (!eventually([&] { return std::filesystem::exists(hold); }, 60s)) {
      std::_Exit(4);
    }
    append("end " + a.at(2) + " " + std::to_string(monotonic_ns()) + "\n");
    std::_Exit(0);
  }
  if (a.at(0) == "query") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(a.at(1))));
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::_Exit(5);
    std::string got;
    char buf[16];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    std::_Exit(got == "ok" ? 0 : 6);
  }
  std::_Exit(7);
}

// --- The log of `record` commands ---
struct log_entry {
  bool start = false;
  std::string label;
  std::int64_t ns = 0;
  std::string token;  // starts only
};

inline std::vector<log_entry> read_log(const std::string& path) {
  std::vector<log_entry> out;
  std::istringstream lines(read_text(path));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string kind;
    log_entry e;
    f >> kind >> e.label >> e.ns >> e.token;
    e.start = kind == "start";
    out.push_back(e);
  }
  return out;
}

inline std::vector<std::string> start_order(const std::vector<log_entry>& log) {
  std::vector<std::string> out;
  for (const auto& e : log) {
    if (e.start) out.push_back(e.label);
  }
  return out;
}

// The most commands that ran at once: each end is logged before its command exits, so before its permit is
// released, and each start after it was admitted; the log's order can only understate the overlap.
inline int max_overlap(const std::vector<log_entry>& log) {
  int now = 0, most = 0;
  for (const auto& e : log) {
    now += e.start ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

inline std::vector<std::string> labels(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

// The labels of the commands that started, in the order of their fencing tokens (Redis: the order of admission;
// local: the queue's tickets). A start without a numeric token fails the test.
inline std::vector<std::string> labels_by_token(const std::vector<log_entry>& entries) {
  std::vector<log_entry> starts;
  for (const auto& e : entries) {
    if (e.start) starts.push_back(e);
  }
  const auto token = [](const log_entry& e) {
    EXPECT_TRUE(!e.token.empty() && e.token.find_first_not_of("0123456789") == std::string::npos) << e.token;
    return e.token.empty() || e.token.find_first_not_of("0123456789") != std::string::npos ? -1 : std::stoll(e.token);
  };
  std::sort(starts.begin(), starts.end(), [&](const log_entry& a, const log_entry& b) { return token(a) < token(b); });
  std::vector<std::string> by_token;
  for (const auto& e : starts) by_token.push_back(e.label);
  return by_token;
}

// Scenario 1 (both backends): `runs` commands of `admit run --concurrency 3 --name NAME <where>` join the queue one
// after another (each waits for the previous one's "waiting" or "started" event: a known arrival order). Then the
// test lets the holders end one at a time (the earliest started first), waiting for the next start each time, so that
// the log's start order is the order of admission without a race between two commands starting at once. Expects
// start order = arrival order, never more than 3 at once (and 3 reached).
inline void fifo_one_release_at_a_time(const std::string& admit, const args& where, const temp_dir& dir, int runs) {
  const std::string log = dir / "fifo.log";
  std::vector<std::optional<child_process>> children(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    auto& c = children[static_cast<std::size_t>(i)];
    c.emplace(args{admit, "run"} + where + args{"--concurrency", "3", "--name", "fifo", "--json", "--"} +
              record_command(log, std::to_string(i), dir / ("release." + std::to_string(i))));
    ASSERT_TRUE(wait_for_event(*c, {"waiting", "started"})) << i << ": " << c->err();
    if (i < 3) {  // admitted at once: its start is logged before the next one can be admitted
      ASSERT_TRUE(eventually([&] { return start_order(read_log(log)).size() == static_cast<std::size_t>(i) + 1; }))
          << read_text(log);
      continue;
    }
    // Nobody has ended yet: the i-th is the (i - 2)-th of i - 2 waiting, behind 3 holders of 3.
    const auto waiting = event(c->err(), "waiting");
    ASSERT_TRUE(waiting.is_object()) << i << ": " << c->err();
    if (!waiting["position"].is_null()) {
      EXPECT_EQ(waiting["position"], i - 2) << waiting.dump();
    }
    EXPECT_EQ(waiting["waiting"], i - 2) << waiting.dump();
    EXPECT_EQ(waiting["held"], 3) << waiting.dump();
    EXPECT_EQ(waiting["capacity"], 3) << waiting.dump();
  }
  std::vector<std::string> released;
  for (int i = 0; i < runs; ++i) {
    const std::size_t expected_starts = std::min<std::size_t>(3 + released.size(), static_cast<std::size_t>(runs));
    ASSERT_TRUE(eventually([&] { return start_order(read_log(log)).size() >= expected_starts; }))
        << "only " << start_order(read_log(log)).size() << " started of " << expected_starts << "\n"
        << read_text(log);
    for (const auto& label : start_order(read_log(log))) {
      if (std::find(released.begin(), released.end(), label) != released.end()) continue;
      released.push_back(label);
      touch(dir / ("release." + label));
      break;
    }
  }
  for (int i = 0; i < runs; ++i) {
    auto& c = children[static_cast<std::size_t>(i)];
    EXPECT_EQ(c->wait(), 0) << i << ": " << c->err();
    const auto started = event(c->err(), "started");
    EXPECT_TRUE(started.is_object()) << c->err();
  }
  const auto entries = read_log(log);
  EXPECT_EQ(start_order(entries), labels(runs)) << read_text(log);
  EXPECT_EQ(max_overlap(entries), 3) << read_text(log);
}

// Scenario 1, free running: the commands hold `hold_ms` each and end by themselves. Never more than 3 at once; sorted
// by fencing token, the commands are in their arrival order (Redis: the token is given at admission, so this is the
// order of admission; local: the token is the queue's ticket).
inline void fifo_free_running(const std::string& admit, const args& where, const temp_dir& dir, int runs, int hold_ms) {
  const std::string log = dir / "free.log";
  std::vector<std::optional<child_process>> children(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    auto& c = children[static_cast<std::size_t>(i)];
    c.emplace(args{admit, "run"} + where + args{"--concurrency", "3", "--name", "free", "--json", "--"} +
              record_command(log, std::to_string(i), std::to_string(hold_ms)));
    ASSERT_TRUE(wait_for_event(*c, {"waiting", "started"})) << i << ": " << c->err();
  }
  for (auto& c : children) EXPECT_EQ(c->wait(), 0) << c->err();
  auto entries = read_log(log);
  EXPECT_LE(max_overlap(entries), 3) << read_text(log);
  EXPECT_EQ(labels_by_token(entries), labels(runs)) << read_text(log);
}

// Scenario 6 (both backends): `runs` queued starts of `admit run --rate 5/s --burst 1 --name rate <where>`, each
// recording its start (CLOCK_MONOTONIC): the k-th is not earlier than the first + k × 200 ms (less 100 ms of the
// commands' own start-up jitter), nor much later (1.5 s).
inline void rate_spacing(const std::string& admit, const args& where, const temp_dir& dir, int runs) {
  const std::string log = dir / "rate.log";
  std::vector<std::optional<child_process>> children(static_cast<std::size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    auto& c = children[static_cast<std::size_t>(i)];
    c.emplace(args{admit, "run"} + where + args{"--name", "rate", "--rate", "5/s", "--burst", "1", "--json", "--"} +
              record_command(log, std::to_string(i), "0"));
    ASSERT_TRUE(wait_for_event(*c, {"waiting", "started"})) << i << ": " << c->err();
  }
  for (auto& c : children) EXPECT_EQ(c->wait(), 0) << c->err();
  std::vector<std::int64_t> starts;
  for (const auto& e : read_log(log)) {
    if (e.start) starts.push_back(e.ns);
  }
  ASSERT_EQ(starts.size(), static_cast<std::size_t>(runs)) << read_text(log);
  std::sort(starts.begin(), starts.end());
  double latest = 0;
  for (std::size_t k = 1; k < starts.size(); ++k) {
    const auto since_first = static_cast<double>(starts[k] - starts[0]) / 1e6;  // ms
    const double due = static_cast<double>(k) * 200.0;
    // A start is its command's first instant, some time after the admission (fork and exec; tens of ms on a loaded
    // machine): the first start's lateness shortens the spacing seen. 100 ms absorbs it and still catches a second
    // start admitted with the first (0 ms) or a rate twice too fast (200 ms short by the third start).
    EXPECT_GE(since_first, due - 100.0) << "start " << k << " came too early";
    EXPECT_LE(since_first, due + 1500.0) << "start " << k << " came late";
    latest = std::max(latest, since_first - due);
  }
  std::cout << "[ measured ] the latest of " << runs << " starts was " << latest
            << " ms after its token bucket's time\n";
}

// Scenario 7 (both backends): a run of a rate alone refused at --timeout (its one token taken by the run before it)
// says that the rate held it back, naming the limit as `place` ("on this host", "at redis://...") and the timeout. It
// said "no permit of", which a rate alone does not have, and not which timeout.
inline void rate_refusal_named(const std::string& admit, const args& where, const std::string& place) {
  const args spaced = args{admit, "run"} + where + args{"--name", "spaced", "--rate", "1/h"};
  ASSERT_EQ(run_to_end(spaced + args{"--", "true"}, 10s).status, 0);
  const run_result r = run_to_end(spaced + args{"--timeout", "200ms", "--json", "--", "true"}, 10s);
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_EQ(event(r.err, "not_admitted").value("message", ""),
            "not admitted: no start by the rate of \"spaced\" " + place + " within --timeout 200ms")
      << r.err;
}

// Scenario 10 (both backends), --classes: a run within its class's guaranteed share starts before an earlier run of
// a class that borrows. Two batch runs hold both permits (one of them borrowed from the interactive class); a batch run
// queues, then an interactive one. When one holder ends, its permit goes to the interactive run, which arrived later:
// the batch class still holds its share. `admit inspect --json` shows each class's load and the queue's classes.
inline void class_share_before_arrival(const std::string& admit, const args& where, const temp_dir& dir) {
  const std::string log = dir / "classes.log";
  const auto run = [&](const std::string& cls, const args& command) {
    return args{admit, "run"} + where + args{"--name", "classes",   "--concurrency",
                                             "2",      "--classes", "interactive=0.5,batch=0.5",
                                             "--json", "--class",   cls,
                                             "--"} +
           command;
  };
  std::vector<std::unique_ptr<child_process>> holders;
  for (const std::string label : {"holder1", "holder2"}) {
    holders.push_back(std::make_unique<child_process>(run("batch", record_command(log, label, dir / label))));
    ASSERT_TRUE(wait_for_event(*holders.back(), {"started"})) << holders.back()->err();
  }
  child_process batch(run("batch", record_command(log, "batch", "0")));
  ASSERT_TRUE(wait_for_event(batch, {"waiting"})) << batch.err();
  child_process interactive(run("interactive", record_command(log, "interactive", "0")));
  ASSERT_TRUE(wait_for_event(interactive, {"waiting"})) << interactive.err();
  // Its place is in its class's queue: the first, though a batch run waits ahead of it.
  const auto waiting = event(interactive.err(), "waiting");
  EXPECT_EQ(waiting.value("class", ""), "interactive") << waiting.dump();
  if (!waiting["position"].is_null()) {  // null with --redis
    EXPECT_EQ(waiting["position"], 1) << waiting.dump();
  }
  EXPECT_EQ(waiting["waiting"], 2) << waiting.dump();
  const run_result r = run_to_end(args{admit, "inspect"} + where + args{"--json", "classes"}, 10s);
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["classes"].is_array() && j["classes"].size() == 2) << r.out << r.err;
  EXPECT_EQ(j["classes"][1]["held"], 2) << r.out;
  EXPECT_EQ(j["classes"][0]["queued"], 1) << r.out;
  EXPECT_EQ(j["queue"][0]["class"], 1) << r.out;  // the batch run arrived first
  touch(dir / "holder1");
  EXPECT_EQ(interactive.wait(), 0) << interactive.err();
  EXPECT_EQ(batch.wait(), 0) << batch.err();  // the interactive run's permit, once it ended
  touch(dir / "holder2");
  for (auto& h : holders) EXPECT_EQ(h->wait(), 0) << h->err();
  // By start time: the batch run could start only once the interactive one had ended.
  EXPECT_EQ(start_order(read_log(log)), (std::vector<std::string>{"holder1", "holder2", "interactive", "batch"}))
      << read_text(log);
}

// This host's name, as `admit run` records it.
inline std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Scenario 8 (both backends): `admit inspect ... --json`'s output lists one holder, the `admit run` of pid
// `holder_pid` on this host running `command`.
inline void expect_inspected_holder(const std::string& out, pid_t holder_pid, const std::string& command) {
  const std::string host = this_host();
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  ASSERT_TRUE(j.contains("holders") && j["holders"].is_array() && j["holders"].size() == 1) << out;
  const auto& h = j["holders"][0];
  ASSERT_TRUE(h.is_object()) << out;
  EXPECT_EQ(h.value("host", ""), host) << out;
  EXPECT_EQ(h.value("pid", std::int64_t{-1}), holder_pid) << out;
  EXPECT_EQ(h.value("command", ""), command) << out;
  EXPECT_TRUE(h.contains("running_s") && h["running_s"].is_number() && h["running_s"].get<double>() >= 0) << out;
}

}  // namespace admit::redis::testing::run
