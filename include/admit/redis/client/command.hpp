// admit/redis/client/command.hpp — a Redis command as its arguments (binary-safe strings), before formatting.
//
//   admit::redis::command cmd{"SET", "key", "value"};
//   cmd.arg("PX").arg(1500);   // integers are written in decimal
//
// Formatting to RESP happens in the connection (hiredis's redisFormatCommandArgv), on the calling thread.
#pragma once

#include <concepts>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace admit::redis {

class command {
 public:
  command() = default;
  command(std::initializer_list<std::string_view> args) {
    args_.reserve(args.size());
    for (std::string_view a : args) args_.emplace_back(a);
  }
  explicit command(std::vector<std::string> args) noexcept : args_(std::move(args)) {}

  // Appends one argument (bytes are copied; embedded NULs are kept).
  command& arg(std::string_view a) & {
    args_.emplace_back(a);
    return *this;
  }
  command&& arg(std::string_view a) && { return std::move(arg(a)); }
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, char>) command& arg(I value) & {
    args_.push_back(std::to_string(value));
    return *this;
  }
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, char>) command && arg(I value) && {
    return std::move(arg(value));
  }

  // Replaces argument `i` (< args().size(); std::out_of_range otherwise).
  command& assign_arg(std::size_t i, std::string_view a) {
    args_.at(i).assign(a);
    return *this;
  }
  // Room for `n` arguments in all, so that appending them allocates no larger list on the way.
  void reserve(std::size_t n) { args_.reserve(n); }

  const std::vector<std::string>& args() const noexcept { return args_; }
  bool empty() const noexcept { return args_.empty(); }

 private:
  std::vector<std::string> args_;
};

namespace detail {

template <class T>
concept command_arg = std::convertible_to<const T&, std::string_view> ||
    (std::integral<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool>);

inline void append_arg(command& c, std::string_view a) { c.arg(a); }
template <std::integral I>
void append_arg(command& c, I value) {
  c.arg(value);
}

// make_command(cmd) is cmd; make_command("SET", "k", 1) builds one.
inline command make_command(command c) { return c; }
template <command_arg... Args>
command make_command(const Args&... args) {
  command c;
  (append_arg(c, args), ...);
  return c;
}

}  // namespace detail
}  // namespace admit::redis
