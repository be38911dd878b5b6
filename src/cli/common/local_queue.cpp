// cli/run/local_queue.cpp — the files of one local limit: see local_queue.hpp and local_limit.hpp.
#include "cli/common/local_queue.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "admit/detail/deadline.hpp"

namespace admit::cli::run::local {

namespace {

[[noreturn]] void fail(int error, const std::string& what, const std::filesystem::path& p) {
  throw std::system_error(error, std::generic_category(), what + " \"" + p.string() + "\"");
}

// flock, retried when a signal interrupts it. Returns 0 or the errno.
int flock_retry(int fd, int op) noexcept {
  while (::flock(fd, op) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

std::string read_all(int fd, const std::filesystem::path& p) {
  std::string s;
  char buf[4096];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno, "cannot read", p);
    if (n == 0) return s;
    s.append(buf, static_cast<std::size_t>(n));
    off += n;
    if (s.size() > (1u << 20)) return s;  // no entry is this large: not ours; the parse will refuse it
  }
}

// Replaces the whole content of the file open on `fd`.
void write_all(int fd, const std::string& s, const std::filesystem::path& p) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::pwrite(fd, s.data() + done, s.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno, "cannot write", p);
    done += static_cast<std::size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(s.size())) != 0) fail(errno, "cannot truncate", p);
}

std::string entry_json(const entry_record& r) {
  nlohmann::ordered_json j;
  j["ticket"] = r.ticket;
  j["weight"] = r.weight;
  j["priority"] = r.priority;
  j["host"] = r.info.host;
  j["pid"] = r.info.pid;
  j["command"] = r.info.command;
  j["started_unix_ms"] = r.info.started_unix_ms;
  if (r.definition) {
    j["capacity"] = r.definition->capacity;
    j["interval_ns"] = r.definition->interval_ns;
    j["burst"] = r.definition->burst;
    if (!r.definition->classes.empty()) {
      auto& classes = j["classes"] = nlohmann::ordered_json::array();
      for (const auto& c : r.definition->classes) classes.push_back({{"name", c.name}, {"share", c.share}});
    }
  }
  // A command line need not be UTF-8: replace what is not, rather than fail.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// An entry's content; fields that cannot be read keep their defaults (weight 1).
void parse_entry(const std::string& text, entry_record& r) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  auto get = [&](const char* key, auto& out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    try {
      it->get_to(out);
    } catch (const nlohmann::json::exception&) {
    }
  };
  get("weight", r.weight);
  get("priority", r.priority);
  get("host", r.info.host);
  get("pid", r.info.pid);
  get("command", r.info.command);
  get("started_unix_ms", r.info.started_unix_ms);
  r.weight = std::max<std::int64_t>(r.weight, 1);
  if (j.contains("capacity")) {
    limit_definition d;
    get("capacity", d.capacity);
    get("interval_ns", d.interval_ns);
    get("burst", d.burst);
    if (auto it = j.find("classes"); it != j.end() && it->is_array()) {
      for (const auto& c : *it) {
        if (!c.is_object()) continue;
        d.classes.push_back({c.value("name", std::string()), c.value("share", 0.0)});
      }
    }
    r.definition = d;
  }
}

}  // namespace

std::optional<std::pair<bool, std::uint64_t>> parse_entry_name(const char* name) {
  std::string_view s(name);
  if (s.size() != 22 || (s[0] != 'w' && s[0] != 'h') || s[1] != '.') return std::nullopt;
  std::uint64_t ticket = 0;
  auto digits = s.substr(2);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ticket);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return std::pair{s[0] == 'h', ticket};
}

std::string entry_name(bool holder, std::uint64_t ticket) {
  std::string digits = std::to_string(ticket);
  return std::string(holder ? "h." : "w.") + std::string(20 - digits.size(), '0') + digits;
}

std::filesystem::path per_user_tmp_directory() {
  return std::filesystem::path("/tmp") / ("admit-" + std::to_string(::getuid()));
}

std::optional<std::filesystem::path> runtime_directory() {
  const char* d = std::getenv("XDG_RUNTIME_DIR");
  if (d == nullptr || d[0] != '/') return std::nullopt;
  struct stat st {};
  if (::stat(d, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return std::nullopt;
  return std::filesystem::path(d) / "admit";
}

namespace {

// A directory of limits refused: what() is the message alone (std::system_error's would add "Permission denied" to
// "is a symbolic link").
class refused_directory : public std::system_error {
 public:
  explicit refused_directory(std::string message)
      : std::system_error(EACCES, std::generic_category()), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace

// The per-user directory in /tmp must be this user's own (see queue_dir): another user who made it first could
// otherwise move or replace the limits' directories in it (more than N at once), or point them elsewhere by a link.
// Once it is this user's, /tmp's sticky bit keeps anyone else from renaming or removing it.
void check_private(const std::filesystem::path& directory) {
  struct stat st {};
  if (::lstat(directory.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // (not made yet: inspect finds no limit)
    fail(errno, "cannot read", directory);
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  std::string why;
  if (S_ISLNK(st.st_mode)) {
    why = "is a symbolic link";
  } else if (!S_ISDIR(st.st_mode)) {
    why = "is not a directory";
  } else if (st.st_uid != ::getuid()) {
    why = "belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " + std::to_string(::getuid()) + ")";
  } else if ((st.st_mode & 022) != 0) {
    why = "may be written by others (mode " + std::string(mode) + ")";
  }
  if (!why.empty()) {
    throw refused_directory("the directory of this user's limits \"" + directory.string() + "\" " + why +
                            ": remove it, or give --lock-dir (or ADMIT_LOCK_DIR) a directory of your own");
  }
}

queue_dir::queue_dir(const std::filesystem::path& directory, const std::string& name, bool create)
    : path_(directory / name) {
  const bool per_user = directory == per_user_tmp_directory() || directory == runtime_directory();
  if (create) {
    std::error_code ec;
    if (directory.has_parent_path()) std::filesystem::create_directories(directory.parent_path(), ec);
    // The directory of names is private unless someone made it otherwise; a name's directory follows the umask
    // (a shared directory of names shares its limits).
    if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) fail(errno, "cannot create the directory", directory);
    if (per_user) check_private(directory);
    if (::mkdir(path_.c_str(), 0777) != 0 && errno != EEXIST) fail(errno, "cannot create the directory", path_);
  } else if (per_user) {
    check_private(directory);
  }
  int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && !create && errno == ENOENT) return;
  if (fd < 0) fail(errno, "cannot open the directory", path_);
  dir_ = unique_fd(fd);
}

unique_fd queue_dir::open_lock() const {
  // Read-only: flock needs no more, others' read-only access to the file suffices, and closing it makes no
  // IN_CLOSE_WRITE event (waiters watch those to learn that an entry's owner has gone).
  unique_fd fd(::openat(dir_.get(), "lock", O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (!fd) fail(errno, "cannot open", path_ / "lock");
  return fd;
}

unique_fd queue_dir::lock() const {
  unique_fd fd = open_lock();
  if (int e = flock_retry(fd.get(), LOCK_EX)) fail(e, "cannot lock", path_ / "lock");
  return fd;
}

std::optional<unique_fd> queue_dir::lock_within(std::chrono::milliseconds patience) const {
  unique_fd fd = open_lock();
  const auto give_up =
      admit::detail::deadline_after<std::chrono::steady_clock>(std::chrono::steady_clock::now(), patience);
  // Tried again after 0.1 ms, doubling to 5 ms: the lock is held for microseconds at each step of a run, and a try
  // soon after a release mostly finds it free among the blocked lockers that its release woke.
  long pause_ns = 100'000;
  for (;;) {
    const int e = flock_retry(fd.get(), LOCK_EX | LOCK_NB);
    if (e == 0) return fd;
    if (e != EWOULDBLOCK) fail(e, "cannot lock", path_ / "lock");
    if (std::chrono::steady_clock::now() >= give_up) return std::nullopt;
    const timespec pause{0, pause_ns};
    ::nanosleep(&pause, nullptr);
    pause_ns = std::min(pause_ns * 2, 5'000'000L);
  }
}

std::vector<entry_record> scan_live(const queue_dir& q) {
  int fd = ::openat(q.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(errno, "cannot open the directory", q.path());
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int e = errno;
    ::close(fd);
    fail(e, "cannot read the directory", q.path());
  }
  std::vector<entry_record> live;
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* d = ::readdir(dir)) names.emplace_back(d->d_name);
  int e = errno;
  ::closedir(dir);
  if (e != 0) fail(e, "cannot read the directory", q.path());
  for (const auto& name : names) {
    auto parsed = parse_entry_name(name.c_str());
    if (!parsed) continue;
    unique_fd entry(::openat(q.fd(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!entry && errno == ENOENT) continue;
    if (!entry) fail(errno, "cannot open", q.path() / name);
    if (int r = flock_retry(entry.get(), LOCK_EX | LOCK_NB); r == 0) {
      // Nobody holds it: its owner (and every process that inherited it) is gone.
      ::unlinkat(q.fd(), name.c_str(), 0);
      continue;
    } else if (r != EWOULDBLOCK) {
      fail(r, "cannot test the lock of", q.path() / name);
    }
    entry_record rec;
    rec.holder = parsed->first;
    rec.ticket = parsed->second;
    parse_entry(read_all(entry.get(), q.path() / name), rec);
    live.push_back(std::move(rec));
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.ticket < b.ticket; });
  return live;
}

std::uint64_t next_ticket(const queue_dir& q, const std::vector<entry_record>& seen) {
  auto p = q.path() / "sequence";
  unique_fd fd(::openat(q.fd(), "sequence", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (!fd) fail(errno, "cannot open", p);
  std::string text = read_all(fd.get(), p);
  std::uint64_t last = 0;
  std::from_chars(text.data(), text.data() + text.size(), last);  // unreadable: 0, the entries still count
  for (const auto& r : seen) last = std::max(last, r.ticket);
  std::uint64_t ticket = last + 1;
  write_all(fd.get(), std::to_string(ticket) + "\n", p);
  return ticket;
}

bool waiter_alive(const queue_dir& q, std::uint64_t ticket) {
  const std::string name = entry_name(false, ticket);
  unique_fd entry(::openat(q.fd(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!entry) return false;
  return flock_retry(entry.get(), LOCK_EX | LOCK_NB) == EWOULDBLOCK;
}

unique_fd create_entry(const queue_dir& q, const entry_record& r) {
  std::string name = entry_name(false, r.ticket);
  auto p = q.path() / name;
  unique_fd fd(::openat(q.fd(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (!fd) fail(errno, "cannot create", p);
  try {
    if (int e = flock_retry(fd.get(), LOCK_EX | LOCK_NB)) fail(e, "cannot lock", p);
    write_all(fd.get(), entry_json(r), p);
  } catch (...) {
    ::unlinkat(q.fd(), name.c_str(), 0);
    throw;
  }
  return fd;
}

void rewrite_entry(const queue_dir& q, int fd, const entry_record& r) {
  write_all(fd, entry_json(r), q.path() / entry_name(r.holder, r.ticket));
}

void promote_entry(const queue_dir& q, std::uint64_t ticket) {
  std::string from = entry_name(false, ticket), to = entry_name(true, ticket);
  if (::renameat(q.fd(), from.c_str(), q.fd(), to.c_str()) != 0) fail(errno, "cannot rename", q.path() / from);
}

void remove_entry(const queue_dir& q, bool holder, std::uint64_t ticket) noexcept {
  ::unlinkat(q.fd(), entry_name(holder, ticket).c_str(), 0);
}

clock_reading read_clock() {
  static const std::string boot_id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
  }();
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return {static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec, boot_id};
}

std::optional<stored_rate> read_rate(const queue_dir& q, const std::string& boot_id) {
  auto p = q.path() / "rate";
  unique_fd fd(::openat(q.fd(), "rate", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd && errno == ENOENT) return std::nullopt;
  if (!fd) fail(errno, "cannot open", p);
  auto j = nlohmann::json::parse(read_all(fd.get(), p), nullptr, false);
  if (!j.is_object() || j.value("boot_id", std::string()) != boot_id) return std::nullopt;
  auto it = j.find("tat_ns");
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  stored_rate r;
  r.tat_ns = it->get<std::int64_t>();
  if (auto a = j.find("assured_tat_ns"); a != j.end() && a->is_array()) {
    for (const auto& v : *a) {
      if (!v.is_number_integer()) {
        r.assured_tat_ns.clear();  // not ours: the classes' buckets start full
        return r;
      }
      r.assured_tat_ns.push_back(v.get<std::int64_t>());
    }
  }
  return r;
}

void write_rate(const queue_dir& q, const std::string& boot_id, const stored_rate& r) {
  auto p = q.path() / "rate";
  unique_fd fd(::openat(q.fd(), "rate", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (!fd) fail(errno, "cannot open", p);
  nlohmann::ordered_json j;
  j["boot_id"] = boot_id;
  j["tat_ns"] = r.tat_ns;
  if (!r.assured_tat_ns.empty()) j["assured_tat_ns"] = r.assured_tat_ns;
  write_all(fd.get(), j.dump() + "\n", p);
}

}  // namespace admit::cli::run::local
