#include "cli/recommend/recorded_trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <istream>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "cli/common/temporary_file.hpp"
#include "cli/replay/arrival_source.hpp"

namespace admit::cli {

namespace {

constexpr std::size_t block_records = 2048;  // 64 KiB

// Heterogeneous lookup: a key read as a string_view finds its index without building a std::string.
struct key_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
};

[[noreturn]] void throw_file_error(const char* what) {
  throw std::system_error(errno, std::generic_category(), std::string("the temporary copy of the trace: ") + what);
}

// Appends records to the temporary file, a block at a time, and interns the keys.
class recorder {
 public:
  recorder(std::FILE* file, std::vector<std::string>& keys) : file_(file), keys_(keys) {
    block_.reserve(block_records);
  }
  // Returns the key's index (0 without keys).
  std::uint32_t add(std::int64_t t_ns, std::int64_t duration_ns, std::int64_t n, std::string_view key, bool keyed) {
    std::uint32_t index = 0;
    if (keyed) {
      auto it = index_.find(key);
      if (it == index_.end()) {
        it = index_.emplace(std::string(key), static_cast<std::uint32_t>(keys_.size())).first;
        keys_.emplace_back(key);
      }
      index = it->second;
    }
    block_.push_back({t_ns, duration_ns, n, index, 0});
    if (block_.size() == block_records) flush();
    return index;
  }
  void flush() {
    if (block_.empty()) return;
    if (std::fwrite(block_.data(), sizeof(recorded_trace::record), block_.size(), file_) != block_.size()) {
      throw_file_error("write error");
    }
    block_.clear();
  }

 private:
  std::FILE* file_;
  std::vector<std::string>& keys_;
  std::unordered_map<std::string, std::uint32_t, key_hash, std::equal_to<>> index_;
  std::vector<recorded_trace::record> block_;
};

}  // namespace

recorded_trace recorded_trace::read(std::istream& in, const log_request& reading) {
  recorded_trace trace;
  trace.file_.reset(temporary_file());
  if (!trace.file_) throw_file_error(("cannot create it in " + temporary_directory().string() + " ($TMPDIR)").c_str());
  trace.durations_ = reading.needs_duration;
  const bool keyed = reading.per_key.has_value();
  recorder out(trace.file_.get(), trace.keys_);
  std::vector<std::int64_t> key_tokens;  // each key's tokens so far (one entry without keys)
  const auto add = [&](std::int64_t t, std::int64_t duration, std::int64_t n, std::string_view key) {
    if (trace.records_ == 0) trace.first_ns_ = t;
    trace.last_ns_ = t;
    ++trace.records_;
    trace.tokens_ += n;
    trace.permit_ns_ += static_cast<double>(n) * static_cast<double>(duration);
    const std::uint32_t k = out.add(t, duration, n, key, keyed);
    if (k >= key_tokens.size()) key_tokens.resize(k + 1, 0);
    key_tokens[k] += n;
    trace.most_key_tokens_ = std::max(trace.most_key_tokens_, key_tokens[k]);
  };
  if (reading.format != log_format::plain) {
    log_reader reader(in, reading);
    for (log_record r; reader.read(r);) add(r.t_ns, r.duration_ns, r.n, r.key);
    trace.skipped_ = reader.skipped();
    trace.reordered_ = reader.reordered();
  } else if (reading.needs_duration) {
    request_trace_parser parser;
    std::string line;
    std::size_t lines = 0;
    while (std::getline(in, line)) {
      ++lines;
      if (const auto r = parser.feed(line)) add(r->t_ns, r->duration_ns, r->n, {});
    }
    if (in.bad()) throw trace_error(lines + 1, "read error");
  } else {
    trace_source arrivals(in);
    for (keyed_arrival next; arrivals.read(next);) add(next.a.t_ns, 0, next.a.n, {});
  }
  out.flush();
  if (std::fflush(trace.file_.get()) != 0) throw_file_error("write error");
  return trace;
}

template <class Visit>
void recorded_trace::for_each(Visit visit) const {
  std::vector<record> block(block_records);
  const int fd = fileno(file_.get());
  off_t offset = 0;
  std::size_t have = 0;  // bytes of a record cut by the end of the last read
  auto* bytes = reinterpret_cast<char*>(block.data());
  const std::size_t capacity = block.size() * sizeof(record);
  for (;;) {
    const ssize_t got = ::pread(fd, bytes + have, capacity - have, offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_file_error("read error");
    }
    if (got == 0) break;
    offset += got;
    have += static_cast<std::size_t>(got);
    const std::size_t whole = have / sizeof(record);
    for (std::size_t i = 0; i < whole; ++i) visit(block[i]);
    const std::size_t rest = have - whole * sizeof(record);
    std::memmove(bytes, bytes + whole * sizeof(record), rest);
    have = rest;
  }
}

replay_result recorded_trace::replay_rate(const replay_settings& settings, bool per_key) const {
  rate_replay_options options;
  options.per_key = per_key;
  rate_replayer replayer(settings, options);
  for_each([&](const record& r) {
    replayer.add(arrival{r.t_ns, r.n, 0}, per_key ? std::string_view(keys_[r.key]) : std::string_view());
  });
  return replayer.finish();
}

concurrency_result recorded_trace::replay_concurrency(const concurrency_settings& settings) const {
  concurrency_replayer replayer(settings);
  for_each([&](const record& r) { replayer.add(request{r.t_ns, r.duration_ns, r.n, 0}); });
  return replayer.finish();
}

}  // namespace admit::cli
