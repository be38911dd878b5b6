#include "cli/common/message.hpp"

#include <algorithm>

namespace admit::cli {

std::size_t utf8_sequence_length(std::string_view text) noexcept {
  if (text.empty()) return 0;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte (excludes overlongs and surrogates)
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (text.size() < len) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < len; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return len;
}

namespace {

// The code point of a valid UTF-8 sequence of `len` bytes.
char32_t code_point(std::string_view seq, std::size_t len) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(seq[i])); };
  static constexpr char32_t lead_bits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  char32_t c = byte(0) & lead_bits[len];
  for (std::size_t i = 1; i < len; ++i) c = (c << 6) | (byte(i) & 0x3f);
  return c;
}

// Valid UTF-8 a terminal would obey rather than show: C1 controls (U+009B is CSI, an escape sequence's start) and the
// bidirectional overrides and isolates, which reorder the text after them.
bool hidden_control(char32_t c) noexcept {
  return (c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

// Appends the quoted form of `text`, at most `max_chars` bytes of it; returns false when it stopped early.
bool append_quoted(std::string& out, std::string_view text, std::size_t max_chars) {
  static constexpr char hex[] = "0123456789abcdef";
  std::size_t i = 0;
  while (i < text.size()) {
    const auto u = static_cast<unsigned char>(text[i]);
    const std::size_t utf8 = u >= 0x80 ? utf8_sequence_length(text.substr(i)) : 0;
    const std::size_t step = utf8 > 0 ? utf8 : 1;
    if (i + step > max_chars) return false;
    if (utf8 > 0 && hidden_control(code_point(text.substr(i), utf8))) {
      char32_t c = code_point(text.substr(i), utf8);
      std::string digits;
      for (; c != 0; c >>= 4) digits.insert(digits.begin(), hex[c & 0xf]);
      out += "\\u{" + digits + "}";
    } else if (utf8 > 0) {
      out.append(text.substr(i, utf8));
    } else if (text[i] == '"' || text[i] == '\\') {
      out.push_back('\\');
      out.push_back(text[i]);
    } else if (u < 0x20 || u >= 0x7f) {
      out += "\\x";
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0xf]);
    } else {
      out.push_back(text[i]);
    }
    i += step;
  }
  return true;
}

}  // namespace

std::string quote(std::string_view text) {
  std::string out = "\"";
  append_quoted(out, text, text.size());
  out += '"';
  return out;
}

std::string as_shown(std::string_view text) {
  std::string quoted;
  append_quoted(quoted, text, text.size());
  // Each '"' and '\\' gains one backslash; anything else escaped (for the terminal) grows by more.
  const auto backslashed = std::count(text.begin(), text.end(), '"') + std::count(text.begin(), text.end(), '\\');
  if (quoted.size() == text.size() + static_cast<std::size_t>(backslashed)) return std::string(text);
  return '"' + quoted + '"';
}

std::string shell_words(const std::vector<std::string>& argv) {
  static constexpr std::string_view plain_punctuation = "@%+=:,./_-";
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    // (A first word with '=' would read as a variable's assignment: quoted, it stays the command.)
    const bool assignment_like = out.empty() && word.find('=') != std::string::npos;
    const bool plain = !word.empty() && !assignment_like && std::all_of(word.begin(), word.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             plain_punctuation.find(c) != std::string_view::npos;
    });
    if (plain) {
      out += word;
      continue;
    }
    out += '\'';
    for (const char c : word) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::string quote_excerpt(std::string_view text, std::size_t max_chars) {
  std::string out = "\"";
  const bool whole = append_quoted(out, text, max_chars);
  out += whole ? "\"" : "\"...";
  return out;
}

namespace {

std::size_t columns(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80 ? 1 : 0;
  return n;
}

}  // namespace

std::string wrap_text(std::string_view text, std::size_t width, std::size_t first_indent, std::size_t indent) {
  std::string out;
  std::size_t column = first_indent;
  bool line_empty = true;
  const auto new_line = [&] {
    out += '\n';
    out.append(indent, ' ');
    column = indent;
    line_empty = true;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\n') {
      new_line();
      ++i;
      continue;
    }
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t end = text.find_first_of(" \n", i);
    std::string_view word = text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
    // A word longer than a whole line ("token-bucket|gcra|...") is broken after a '|' where one fits.
    if (indent + columns(word) > width) {
      const std::size_t room = width > column + 1 ? width - column - (line_empty ? 0 : 1) : 0;
      std::size_t cut = word.substr(0, room).rfind('|');
      if (cut == std::string_view::npos && !line_empty) {
        new_line();
        continue;
      }
      if (cut != std::string_view::npos) word = word.substr(0, cut + 1);
    }
    const std::size_t w = columns(word);
    if (!line_empty && column + 1 + w > width) new_line();
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out.append(word);
    column += w;
    line_empty = false;
    i += word.size();
    if (i < text.size() && text[i - 1] == '|' && text[i] != ' ' && text[i] != '\n') new_line();
  }
  return out;
}

std::string without_cpp_name(std::string_view what) {
  if (what.substr(0, 7) != "admit::") return std::string(what);
  // The name is identifiers and "::" up to the first ": ".
  std::size_t i = 0;
  while (i < what.size() && (what[i] == ':' || what[i] == '_' || (what[i] >= 'a' && what[i] <= 'z') ||
                             (what[i] >= 'A' && what[i] <= 'Z') || (what[i] >= '0' && what[i] <= '9'))) {
    if (what.substr(i, 2) == ": ") return std::string(what.substr(i + 2));
    ++i;
  }
  return std::string(what);
}

}  // namespace admit::cli
