// admit/redis/client/pipeline.hpp — commands for one write, encoded as they are added.
//
//   admit::redis::pipeline p;
//   p.add("INCRBY", key, 5).add("EXPIRE", key, 60, "NX");
//   conn.async_execute_pipeline_until(deadline, std::move(p), handler);  // one reply: an array of both replies
//
// Each add() writes its command's RESP bytes at the end of one buffer: no object per command or per argument, so a
// pipeline of many small commands costs one growing string. Arguments as admit::redis::command's: string-like
// (binary-safe) or integers, written in decimal.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "admit/redis/client/command.hpp"

namespace admit::redis {

namespace detail {

// RESP's framing of a request: "*<count>\r\n", then "$<length>\r\n<bytes>\r\n" per argument.
// "<lead><count>\r\n" in one append.
inline void append_header(std::string& out, char lead, std::size_t count) {
  char head[24];
  head[0] = lead;
  char* end = std::to_chars(head + 1, head + 21, count).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(head, end);
}
inline void append_array_header(std::string& out, std::size_t count) { append_header(out, '*', count); }
inline void append_bulk(std::string& out, std::string_view bytes) {
  append_header(out, '$', bytes.size());
  out.append(bytes).append("\r\n", 2);
}
template <std::integral I>
void append_bulk(std::string& out, I value) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  append_bulk(out, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

// `cmd`'s RESP bytes appended to `out`; throws std::invalid_argument (appending nothing) when it is empty.
inline void append_command(std::string& out, const command& cmd) {
  if (cmd.empty()) throw std::invalid_argument("redis command: empty (no arguments)");
  std::size_t size = 16;  // the header; per argument its bytes, the length's digits and 5 bytes of framing
  for (const std::string& a : cmd.args()) size += a.size() + 26;
  out.reserve(out.size() + size);
  append_array_header(out, cmd.args().size());
  for (const std::string& a : cmd.args()) append_bulk(out, a);
}

}  // namespace detail

class pipeline {
 public:
  pipeline() = default;

  // Appends one command; throws std::invalid_argument (before appending anything) when it has no argument.
  template <detail::command_arg... Args>
  pipeline& add(const Args&... args) & {
    if constexpr (sizeof...(Args) == 0) {
      throw std::invalid_argument("redis pipeline: an empty command (no arguments)");
    } else {
      detail::append_array_header(payload_, sizeof...(Args));
      (append_arg(args), ...);
      ++size_;
      return *this;
    }
  }
  template <detail::command_arg... Args>
  pipeline&& add(const Args&... args) && {
    return std::move(add(args...));
  }
  // Appends an admit::redis::command (throws std::invalid_argument when it is empty).
  pipeline& add(const command& cmd) & {
    detail::append_command(payload_, cmd);
    ++size_;
    return *this;
  }
  pipeline&& add(const command& cmd) && { return std::move(add(cmd)); }

  // Room for about `bytes` more of encoded commands.
  void reserve(std::size_t bytes) { payload_.reserve(payload_.size() + bytes); }
  std::size_t size() const noexcept { return size_; }  // commands
  bool empty() const noexcept { return size_ == 0; }
  const std::string& payload() const& noexcept { return payload_; }  // the RESP bytes
  std::string payload() && noexcept { return std::move(payload_); }

 private:
  template <class A>
  void append_arg(const A& a) {
    static_assert(!std::is_same_v<A, char>, "a char argument: pass a string (\"x\") or an integer type");
    if constexpr (std::is_convertible_v<const A&, std::string_view>) {
      detail::append_bulk(payload_, std::string_view(a));
    } else {
      detail::append_bulk(payload_, a);
    }
  }

  std::string payload_;
  std::size_t size_ = 0;
};

}  // namespace admit::redis
