#include "serve/config/yaml_scalar.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace admit::serve::yaml {

namespace {

constexpr std::array<std::string_view, 11> true_words{"y",    "Y",    "yes", "Yes", "YES", "true",
                                                      "True", "TRUE", "on",  "On",  "ON"};
constexpr std::array<std::string_view, 11> false_words{"n",     "N",     "no",  "No",  "NO", "false",
                                                       "False", "FALSE", "off", "Off", "OFF"};
constexpr std::array<std::string_view, 5> null_words{"", "~", "null", "Null", "NULL"};
constexpr std::array<std::string_view, 12> special_floats{".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf", "+.INF",
                                                          "-.inf", "-.Inf", "-.INF", ".nan",  ".NaN",  ".NAN"};

bool quoted_or_tagged_string(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str";
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Go's strconv.ParseInt/ParseUint with base 0 on the text with its underscores removed, as go-yaml v2 resolves a
// plain scalar: optional sign, then 0x / 0o / 0b / a leading 0 (octal) or decimal digits. Empty when not an integer
// or when the magnitude does not fit 64 bits (or, negative, int64).
std::optional<integer_value> parse_integer(std::string_view text) {
  std::string s;
  for (char c : text)
    if (c != '_') s.push_back(c);
  std::string_view v = s;
  integer_value out;
  if (!v.empty() && (v.front() == '+' || v.front() == '-')) {
    out.negative = v.front() == '-';
    v.remove_prefix(1);
  }
  int base = 10;
  if (v.size() >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    base = 16;
    v.remove_prefix(2);
  } else if (v.size() >= 2 && v[0] == '0' && (v[1] == 'o' || v[1] == 'O')) {
    base = 8;
    v.remove_prefix(2);
  } else if (v.size() >= 2 && v[0] == '0' && (v[1] == 'b' || v[1] == 'B')) {
    base = 2;
    v.remove_prefix(2);
  } else if (v.size() >= 2 && v[0] == '0') {
    base = 8;
    v.remove_prefix(1);
  }
  if (v.empty()) return std::nullopt;
  for (char c : v) {
    const int d = digit_value(c);
    if (d >= base) return std::nullopt;
    const auto b = static_cast<std::uint64_t>(base);
    if (out.magnitude > (UINT64_MAX - static_cast<std::uint64_t>(d)) / b) return std::nullopt;
    out.magnitude = out.magnitude * b + static_cast<std::uint64_t>(d);
  }
  if (out.negative && out.magnitude > static_cast<std::uint64_t>(INT64_MAX) + 1) return std::nullopt;
  return out;
}

// go-yaml v2's float syntax: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? (underscores removed first).
bool is_float(std::string_view text) {
  std::string s;
  for (char c : text)
    if (c != '_') s.push_back(c);
  std::string_view v = s;
  auto digits = [&v] {
    std::size_t n = 0;
    while (n < v.size() && v[n] >= '0' && v[n] <= '9') ++n;
    v.remove_prefix(n);
    return n;
  };
  if (!v.empty() && (v.front() == '+' || v.front() == '-')) v.remove_prefix(1);
  if (!v.empty() && v.front() == '.') {
    v.remove_prefix(1);
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (!v.empty() && v.front() == '.') {
      v.remove_prefix(1);
      digits();
    }
  }
  if (!v.empty() && (v.front() == 'e' || v.front() == 'E')) {
    v.remove_prefix(1);
    if (!v.empty() && (v.front() == '+' || v.front() == '-')) v.remove_prefix(1);
    if (digits() == 0) return false;
  }
  return v.empty();
}

}  // namespace

scalar_kind kind_of(const YAML::Node& node) {
  if (node.IsNull()) return scalar_kind::null;
  if (quoted_or_tagged_string(node)) return scalar_kind::string;
  const std::string& text = node.Scalar();
  if (one_of(null_words, text)) return scalar_kind::null;
  if (one_of(true_words, text) || one_of(false_words, text)) return scalar_kind::boolean;
  if (one_of(special_floats, text)) return scalar_kind::floating;
  const char first = text.empty() ? '\0' : text.front();
  if ((first >= '0' && first <= '9') || first == '+' || first == '-' || first == '.') {
    if (parse_integer(text)) return scalar_kind::integer;
    if (is_float(text)) return scalar_kind::floating;
  }
  return scalar_kind::string;
}

std::optional<bool> boolean_of(const YAML::Node& node) {
  if (kind_of(node) != scalar_kind::boolean) return std::nullopt;
  return one_of(true_words, node.Scalar());
}

std::optional<integer_value> integer_of(const YAML::Node& node) {
  if (kind_of(node) != scalar_kind::integer) return std::nullopt;
  return parse_integer(node.Scalar());
}

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  switch (kind_of(node)) {
    case scalar_kind::null:
      return "null";
    case scalar_kind::boolean:
      return "the boolean " + node.Scalar();
    case scalar_kind::integer:
    case scalar_kind::floating:
      return "the number " + node.Scalar();
    case scalar_kind::string:
      break;
  }
  return "the string \"" + node.Scalar() + "\"";
}

}  // namespace admit::serve::yaml
