// admit_run_handoff — the timing helper of bench/run_compare.sh, which compares `admit run` with flock(1) and GNU
// `sem`: the cost of one invocation, and the hand-off latency from one command's exit to the next command's start.
//
//   admit_run_handoff overhead N -- COMMAND...            N runs of COMMAND one after the other; prints ns per run
//   admit_run_handoff handoff [options] -- PREFIX...       hand-off rounds through PREFIX (a limiter's command line
//                                                         that runs the words after it as the command)
//   admit_run_handoff hold FIFO OUT                       (the holder's command: see below)
//   admit_run_handoff start OUT                           (the waiter's command: see below)
//
// overhead: posix_spawn + waitpid, COMMAND's stdout and stderr to /dev/null, CLOCK_MONOTONIC around the N runs. A run
// that exits with a status other than 0 is an error (exit 1).
//
// handoff options: --rounds N (timed), --warmup N (untimed rounds first, default 5), --probe admit-json|syscall|none,
// --settle-ms S and --jitter-ms J (default 2 and 10), --floor (no limiter: PREFIX is empty), --samples FILE (every
// latency in ns, one a line). One round, with one permit:
//   1. the holder: PREFIX... admit_run_handoff hold FIFO OUT_H. Its command opens the FIFO for reading, which the
//      driver's open for writing waits for: once it returns, the holder's command runs, so the holder holds the permit.
//   2. the waiter: PREFIX... admit_run_handoff start OUT_W; the driver waits until it is queued for the permit:
//      admit-json — its stderr (`admit run --json`) shows the "waiting" event; syscall — the waiter process is blocked
//      in flock(2) (flock(1)) or sleeping between polls in select/pselect6/nanosleep (GNU sem); none — at once.
//   3. --settle-ms plus a uniformly random 0..--jitter-ms ms later (the release then lands at a random phase of any
//      poll period), the driver writes a byte to the FIFO: the holder's command reads it, reads CLOCK_MONOTONIC (t0),
//      writes t0 to OUT_H and exits. The limiter sees its command end and passes the permit on.
//   4. the waiter's command reads CLOCK_MONOTONIC (t1) first thing in main() and writes it to OUT_W. The latency is
//      t1 - t0: the holder's exit, the limiter's release and hand-off, the waiter's start of its command (fork, exec,
//      the dynamic loader of this program). Then the driver waits for both limiters to exit.
//   --floor: no limiter; the driver waits for the holder (waitpid) and only then starts the waiter: the least a
//   hand-off between two processes costs here (exit, the parent's wake-up, posix_spawn, exec, the loader).
// Output: "p50 p90 p99 max mean rounds" in µs (nearest-rank percentiles) on stdout; a failed round (a limiter or a
// command that exited with a status other than 0, the waiter started before the holder exited, 10 s without progress)
// is an error (exit 1) naming the round.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "admit_run_handoff: %s\n", what.c_str());
  std::exit(1);
}

// Writes `ns` to the file `path` (created or truncated).
void write_stamp(const char* path, std::int64_t ns) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%" PRId64 "\n", ns);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, buf, static_cast<std::size_t>(n)) != n) fail(std::string("cannot write ") + path);
  ::close(fd);
}

std::int64_t read_stamp(const std::string& path) {
  std::ifstream in(path);
  std::int64_t v = 0;
  if (!(in >> v)) fail("no time stamp in " + path);
  return v;
}

// Starts argv with stdout to /dev/null and stderr to `stderr_fd` (-1: /dev/null).
pid_t spawn(const std::vector<std::string>& args, int stderr_fd = -1) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (stderr_fd >= 0) {
    ::posix_spawn_file_actions_adddup2(&fa, stderr_fd, 2);
  } else {
    ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  const int e = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  if (e != 0) fail("cannot start " + args[0] + ": " + std::strerror(e));
  return pid;
}

// Waits for `pid` at most until `deadline_ns`; its exit status (128+N: signal N).
int wait_exit(pid_t pid, std::int64_t deadline_ns, const std::string& who) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) fail("waitpid " + who + ": " + std::strerror(errno));
    if (monotonic_ns() > deadline_ns) {
      ::kill(pid, SIGKILL);
      fail(who + " did not exit within 10 s");
    }
    ::usleep(200);
  }
}

bool exited(pid_t pid, int& status) {
  int s = 0;
  if (::waitpid(pid, &s, WNOHANG) != pid) return false;
  status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  return true;
}

// The system call `pid` is blocked in (-1: running or unknown), from /proc/PID/syscall.
long blocked_syscall(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
  std::string first;
  if (!(in >> first) || first == "running") return -1;
  char* end = nullptr;
  const long nr = std::strtol(first.c_str(), &end, 10);
  return *end == '\0' ? nr : -1;
}

// Waiting for a permit: flock(2) for flock(1); sleeping between polls (select, pselect6, nanosleep,
// clock_nanosleep) for GNU sem, which retries with growing random sleeps.
bool waiting_syscall(long nr) {
#if defined(__x86_64__)
  return nr == 73 || nr == 23 || nr == 270 || nr == 35 || nr == 230;
#else
  (void)nr;
  return false;
#endif
}

int overhead(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) fail("usage: overhead N -- COMMAND...");
  const long n = std::strtol(argv[2], nullptr, 10);
  if (n < 1) fail(std::string("N must be 1 or more, not ") + argv[2]);
  std::vector<std::string> cmd(argv + 4, argv + argc);
  const std::int64_t start = monotonic_ns();
  for (long i = 0; i < n; ++i) {
    const pid_t pid = spawn(cmd);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("run " + std::to_string(i + 1) + " of " + cmd[0] + " failed");
  }
  std::printf("%.0f\n", static_cast<double>(monotonic_ns() - start) / static_cast<double>(n));
  return 0;
}

struct handoff_options {
  long rounds = 200, warmup = 5;
  std::string probe = "none";
  double settle_ms = 2, jitter_ms = 10;
  bool floor = false;
  std::string samples;
  std::vector<std::string> prefix;
};

handoff_options parse_handoff(int argc, char** argv) {
  handoff_options o;
  int i = 2;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "--rounds")
      o.rounds = std::stol(value());
    else if (a == "--warmup")
      o.warmup = std::stol(value());
    else if (a == "--probe")
      o.probe = value();
    else if (a == "--settle-ms")
      o.settle_ms = std::stod(value());
    else if (a == "--jitter-ms")
      o.jitter_ms = std::stod(value());
    else if (a == "--samples")
      o.samples = value();
    else if (a == "--floor")
      o.floor = true;
    else
      fail("unknown option " + a +
           " (expected --rounds, --warmup, --probe, --settle-ms, --jitter-ms, --floor, --samples)");
  }
  if (i < argc) o.prefix.assign(argv + i + 1, argv + argc);
  if (o.probe != "admit-json" && o.probe != "syscall" && o.probe != "none") {
    fail("--probe " + o.probe + " (expected admit-json, syscall or none)");
  }
  if (o.rounds < 1) fail("--rounds must be 1 or more");
  if (o.prefix.empty() != o.floor) fail("give a PREFIX after --, or --floor without one");
  return o;
}

// One hand-off; returns t1 - t0 in ns.
std::int64_t one_round(const handoff_options& o, const std::string& self, const std::string& dir, long round,
                       std::mt19937_64& rng) {
  const std::string fifo = dir + "/fifo", out_h = dir + "/holder", out_w = dir + "/waiter";
  ::unlink(out_h.c_str());
  ::unlink(out_w.c_str());
  const std::string what = "round " + std::to_string(round);
  auto command = [&](std::vector<std::string> tail) {
    std::vector<std::string> c = o.prefix;
    c.insert(c.end(), tail.begin(), tail.end());
    return c;
  };
  const std::int64_t deadline = monotonic_ns() + 10'000'000'000;
  const pid_t holder = spawn(command({self, "hold", fifo, out_h}));
  int fifo_fd = -1, status = 0;
  while ((fifo_fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
    if (errno != ENXIO) fail("open " + fifo + ": " + std::strerror(errno));
    if (exited(holder, status))
      fail(what + ": the holder exited (" + std::to_string(status) + ") before its command ran");
    if (monotonic_ns() > deadline) fail(what + ": the holder's command did not start within 10 s");
    ::usleep(100);
  }
  int pipe_fds[2] = {-1, -1};
  const bool json = o.probe == "admit-json";
  if (json && ::pipe2(pipe_fds, O_CLOEXEC) != 0) fail("pipe2");
  auto start_waiter = [&] { return spawn(command({self, "start", out_w}), json ? pipe_fds[1] : -1); };
  pid_t waiter = -1;
  if (!o.floor) {
    waiter = start_waiter();
    if (json) {
      ::close(pipe_fds[1]);
      ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    }
    std::string seen;
    for (bool ready = o.probe == "none"; !ready;) {
      if (json) {
        char buf[4096];
        ssize_t n = 0;
        while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) seen.append(buf, static_cast<std::size_t>(n));
        ready = seen.find("\"event\": \"waiting\"") != std::string::npos ||
                seen.find("\"event\":\"waiting\"") != std::string::npos;
      } else {
        ready = waiting_syscall(blocked_syscall(waiter));
      }
      if (ready) break;
      if (exited(waiter, status))
        fail(what + ": the waiter exited (" + std::to_string(status) + ") while the holder held " + seen);
      if (monotonic_ns() > deadline) fail(what + ": the waiter was not seen waiting within 10 s");
      ::usleep(100);
    }
    std::uniform_real_distribution<double> jitter(0, o.jitter_ms);
    const double pause_ms = o.settle_ms + jitter(rng);
    ::usleep(static_cast<useconds_t>(pause_ms * 1000));
  }
  if (::write(fifo_fd, "x", 1) != 1) fail("write " + fifo);
  ::close(fifo_fd);
  if (o.floor) {
    // Blocking, not polling: the driver wakes when the holder exits, as a limiter's own process would.
    int hs = 0;
    while (::waitpid(holder, &hs, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(hs) || WEXITSTATUS(hs) != 0) fail(what + ": the holder failed");
    waiter = start_waiter();
  }
  const int sw = wait_exit(waiter, deadline, "the waiter");
  if (!o.floor) {
    if (const int s = wait_exit(holder, deadline, "the holder"); s != 0)
      fail(what + ": the holder exited " + std::to_string(s));
  }
  if (json) ::close(pipe_fds[0]);
  if (sw != 0) fail(what + ": the waiter exited " + std::to_string(sw));
  const std::int64_t t0 = read_stamp(out_h), t1 = read_stamp(out_w);
  if (t1 < t0) fail(what + ": the waiter's command started before the holder's ended (it was not queued)");
  return t1 - t0;
}

int handoff(int argc, char** argv) {
  const handoff_options o = parse_handoff(argc, argv);
  char self_buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self_buf, sizeof self_buf - 1);
  if (n <= 0) fail("cannot read /proc/self/exe");
  const std::string self(self_buf, static_cast<std::size_t>(n));
  char dir_template[] = "/tmp/admit-run-handoff-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) fail("mkdtemp");
  const std::string dir = dir_template, fifo = dir + "/fifo";
  if (::mkfifo(fifo.c_str(), 0600) != 0) fail("mkfifo " + fifo);
  std::mt19937_64 rng(12345);
  std::vector<std::int64_t> v;
  for (long r = 1; r <= o.warmup + o.rounds; ++r) {
    const std::int64_t ns = one_round(o, self, dir, r, rng);
    if (r > o.warmup) v.push_back(ns);
  }
  for (const char* f : {"/fifo", "/holder", "/waiter"}) ::unlink((dir + f).c_str());
  ::rmdir(dir.c_str());
  if (!o.samples.empty()) {
    std::ofstream out(o.samples);
    for (auto x : v) out << x << "\n";
  }
  std::vector<std::int64_t> s = v;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) {
    const auto k = static_cast<std::size_t>(std::max(1.0, std::ceil(p * static_cast<double>(s.size()))));
    return static_cast<double>(s[k - 1]) / 1000;
  };
  double mean = 0;
  for (auto x : s) mean += static_cast<double>(x);
  mean /= static_cast<double>(s.size()) * 1000;
  std::printf("%.1f %.1f %.1f %.1f %.1f %zu\n", pct(0.5), pct(0.9), pct(0.99), static_cast<double>(s.back()) / 1000,
              mean, s.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The waiter's command: the clock first, before anything else this process does.
  const std::int64_t started = monotonic_ns();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "start" && argc == 3) {
    write_stamp(argv[2], started);
    return 0;
  }
  if (mode == "hold" && argc == 4) {
    const int fd = ::open(argv[2], O_RDONLY | O_CLOEXEC);  // the driver's open for writing returns now
    if (fd < 0) fail(std::string("open ") + argv[2] + ": " + std::strerror(errno));
    char c = 0;
    if (::read(fd, &c, 1) != 1) fail("the driver closed the FIFO without a byte");
    write_stamp(argv[3], monotonic_ns());
    return 0;
  }
  try {
    if (mode == "overhead") return overhead(argc, argv);
    if (mode == "handoff") return handoff(argc, argv);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  fail(
      "usage: admit_run_handoff overhead N -- COMMAND... | handoff [options] -- PREFIX... | hold FIFO OUT | start OUT");
}
