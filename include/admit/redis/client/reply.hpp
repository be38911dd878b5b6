// admit/redis/client/reply.hpp — one Redis reply (RESP2) as a value that owns its data: string, integer, array, nil,
// status or error.
//
//   admit::redis::reply r = conn.execute("INCR", "hits").value;
//   if (r.is_integer()) std::cout << r.integer();   // 1
//
// A Redis error reply is a value, not an exception: is_error() and error_prefix() ("NOSCRIPT", "MOVED", "ASK",
// "WRONGTYPE", "ERR", ...) tell them apart.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace admit::redis {

enum class reply_type { nil, string, integer, array, status, error };

// What an error reply says of the command that got it, by the reply's first word.
enum class error_kind {
  // "Not now" rather than "not this way": the same command may succeed by waiting. LOADING (a restarted server loading
  // its data), BUSY (a script running past busy-reply-threshold), TRYAGAIN (a multi-key command while its slot
  // migrates), MASTERDOWN (a replica cut off from its master), CLUSTERDOWN (a cluster missing a slot's master, or a
  // node rejoining).
  transient,
  // The client's credentials are refused, which waiting does not mend: NOAUTH (the server wants a password),
  // WRONGPASS (AUTH's user or password is wrong), NOPERM (the user may not run this command or touch this key).
  credentials,
  // Anything else: ERR, WRONGTYPE, NOSCRIPT, MOVED, READONLY, OOM, ...
  other,
};

// The kind of an error reply whose text is `error_text` (its first word decides; exact and case-sensitive, as Redis
// sends them upper-case).
constexpr error_kind kind_of_error(std::string_view error_text) noexcept {
  const std::string_view p = error_text.substr(0, error_text.find(' '));
  if (p == "LOADING" || p == "BUSY" || p == "TRYAGAIN" || p == "MASTERDOWN" || p == "CLUSTERDOWN") {
    return error_kind::transient;
  }
  if (p == "NOAUTH" || p == "WRONGPASS" || p == "NOPERM") return error_kind::credentials;
  return error_kind::other;
}

class reply {
 public:
  // A nil reply.
  reply() = default;

  static reply string(std::string s) { return reply(reply_type::string, std::move(s)); }
  static reply status(std::string s) { return reply(reply_type::status, std::move(s)); }
  static reply error(std::string s) { return reply(reply_type::error, std::move(s)); }
  static reply integer(std::int64_t v) {
    reply r;
    r.type_ = reply_type::integer;
    r.integer_ = v;
    return r;
  }
  static reply array(std::vector<reply> elements) {
    reply r;
    r.type_ = reply_type::array;
    r.elements_ = std::move(elements);
    return r;
  }

  reply_type type() const noexcept { return type_; }
  bool is_nil() const noexcept { return type_ == reply_type::nil; }
  bool is_string() const noexcept { return type_ == reply_type::string; }
  bool is_integer() const noexcept { return type_ == reply_type::integer; }
  bool is_array() const noexcept { return type_ == reply_type::array; }
  bool is_status() const noexcept { return type_ == reply_type::status; }
  bool is_error() const noexcept { return type_ == reply_type::error; }

  // The text of a string, status or error reply (the full error message, e.g. "NOSCRIPT No matching script...");
  // empty for the other types.
  const std::string& str() const noexcept { return str_; }
  // The value of an integer reply; 0 for the other types.
  std::int64_t integer() const noexcept { return integer_; }
  // The elements of an array reply; empty for the other types.
  const std::vector<reply>& elements() const noexcept { return elements_; }
  std::vector<reply>& elements() noexcept { return elements_; }

  // For an error reply, its first word ("NOSCRIPT", "MOVED", "ASK", "ERR", "WRONGTYPE", ...); empty otherwise.
  std::string_view error_prefix() const noexcept {
    if (type_ != reply_type::error) return {};
    const std::string_view s = str_;
    return s.substr(0, s.find(' '));
  }
  // True for an error reply whose first word is `prefix` (exact, case-sensitive: Redis sends them upper-case).
  bool is_error(std::string_view prefix) const noexcept { return is_error() && error_prefix() == prefix; }
  // True for an error reply that says "not now" rather than "not this way" (error_kind::transient).
  bool is_transient_error() const noexcept { return is_error() && kind_of_error(str_) == error_kind::transient; }
  // True for an error reply that refuses the client's credentials (error_kind::credentials).
  bool is_credentials_error() const noexcept { return is_error() && kind_of_error(str_) == error_kind::credentials; }

  friend bool operator==(const reply&, const reply&) = default;

  // Debug form: "nil", "\"text\"", "(integer) 3", "+OK", "-ERR ...", "[a, b]".
  friend std::ostream& operator<<(std::ostream& os, const reply& r) {
    switch (r.type_) {
      case reply_type::nil:
        return os << "nil";
      case reply_type::string:
        return os << '"' << r.str_ << '"';
      case reply_type::integer:
        return os << "(integer) " << r.integer_;
      case reply_type::status:
        return os << '+' << r.str_;
      case reply_type::error:
        return os << '-' << r.str_;
      case reply_type::array:
        os << '[';
        for (std::size_t i = 0; i < r.elements_.size(); ++i) os << (i == 0 ? "" : ", ") << r.elements_[i];
        return os << ']';
    }
    return os;
  }

 private:
  reply(reply_type t, std::string s) : type_(t), str_(std::move(s)) {}

  reply_type type_ = reply_type::nil;
  std::int64_t integer_ = 0;
  std::string str_;
  std::vector<reply> elements_;
};

}  // namespace admit::redis
