// `admit`'s JSON output (see json.hpp).
#include "cli/common/json.hpp"

#include <cmath>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>

namespace admit::cli {

std::string json_string(std::string_view text) {
  // Invalid UTF-8 (a file name is bytes) becomes U+FFFD rather than an exception: the output is always valid JSON.
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  // A whole value prints as an integer ("5", not "5.0"), as it always did.
  if (std::abs(v) < 9e15 && v == std::round(v)) return static_cast<std::int64_t>(v);
  return v;
}

nlohmann::ordered_json json_seconds(std::int64_t ns) {
  if (ns % 1'000'000'000 == 0) return ns / 1'000'000'000;
  return static_cast<double>(ns) / 1e9;
}

nlohmann::ordered_json json_mean_seconds(double mean_ns) { return json_number(std::round(mean_ns) / 1e9); }

void write_json_document(std::ostream& out, const nlohmann::ordered_json& document) {
  out << document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void write_json_document_streaming(std::ostream& out, const nlohmann::ordered_json& document, bool any,
                                   const std::function<void(std::ostream&)>& write_elements) {
  if (document.empty() || !document.back().is_array() || !document.back().empty()) {
    throw std::logic_error("write_json_document_streaming: the last member must be an empty array");
  }
  const std::string text = document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  // The document ends with `[]` and the closing brace: the elements go between the brackets.
  const auto empty = text.rfind("[]");
  out.write(text.data(), static_cast<std::streamsize>(empty + 1));
  if (any) {
    out << "\n";
    write_elements(out);
    out << "\n  ";
  }
  out << std::string_view(text).substr(empty + 1) << "\n";
}

std::string json_array_element(const nlohmann::ordered_json& element) {
  const std::string alone = element.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "    ";
  for (const char c : alone) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

namespace {

void write_json_inline(std::ostream& out, const nlohmann::ordered_json& value) {
  if (value.is_object()) {
    out << '{';
    const char* separator = "";
    for (const auto& [key, member] : value.items()) {
      out << separator << json_string(key) << ": ";
      write_json_inline(out, member);
      separator = ", ";
    }
    out << '}';
  } else if (value.is_array()) {
    out << '[';
    const char* separator = "";
    for (const auto& element : value) {
      out << separator;
      write_json_inline(out, element);
      separator = ", ";
    }
    out << ']';
  } else {
    out << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace

void write_json_line(std::ostream& out, const nlohmann::ordered_json& document) {
  write_json_inline(out, document);
  out << "\n";
}

}  // namespace admit::cli
