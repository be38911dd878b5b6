#include "serve/config/yaml_document.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "serve/config/configuration.hpp"
#include "serve/config/yaml_scalar.hpp"

namespace admit::serve::yaml {

namespace {

using YAML::Node;

// The keys of envoyproxy/ratelimit's format. As there, each is accepted at any level (one that does not belong where
// it is written is ignored), so that every file it loads, admit loads.
constexpr std::array<std::string_view, 16> format_keys{"domain",
                                                       "descriptors",
                                                       "key",
                                                       "value",
                                                       "rate_limit",
                                                       "unit",
                                                       "requests_per_unit",
                                                       "unlimited",
                                                       "shadow_mode",
                                                       "name",
                                                       "replaces",
                                                       "detailed_metric",
                                                       "value_to_metric",
                                                       "share_threshold",
                                                       "quota_mode",
                                                       "metadata"};
// admit's extensions: accepted inside a rate_limit map only.
constexpr std::array<std::string_view, 5> extension_keys{"algorithm", "burst", "concurrency", "over_limit_hits",
                                                         "prefetch"};

// What a map holds at each level, for the list of keys a message offers.
enum class level : std::uint8_t { root, descriptor, rate_limit, replaces, other };

std::string_view keys_of(level l) {
  switch (l) {
    case level::root:
      return "domain, descriptors";
    case level::descriptor:
      return "key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold, "
             "quota_mode, metadata";
    case level::rate_limit:
      return "unit, requests_per_unit, unlimited, name, replaces, and admit's algorithm, burst, concurrency, "
             "over_limit_hits, prefetch";
    case level::replaces:
      return "name";
    case level::other:
      break;
  }
  return "domain, descriptors, key, value, rate_limit, unit, requests_per_unit, unlimited, name, replaces, "
         "shadow_mode, detailed_metric, value_to_metric, share_threshold, quota_mode, metadata";
}

int line_of(const Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() || m.line < 0 ? 0 : m.line + 1;
}

struct pair_of {
  Node key;
  Node value;
};

// The pairs of a map in order, with YAML merge keys (`<<: *anchor`, a map or a list of maps) expanded in place, as
// go-yaml v2 reads them. A key given twice is kept twice: readers take the last, as go-yaml v2 does.
void pairs_into(const Node& map, std::vector<pair_of>& out) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const Node k = it->first;
    const Node v = it->second;
    if (k.IsScalar() && k.Tag() == "?" && k.Scalar() == "<<" && (v.IsMap() || v.IsSequence())) {
      if (v.IsMap()) {
        pairs_into(v, out);
      } else {
        for (const Node& m : v)
          if (m.IsMap()) pairs_into(m, out);
      }
      continue;
    }
    out.push_back({k, v});
  }
}

std::vector<pair_of> pairs(const Node& map) {
  std::vector<pair_of> out;
  pairs_into(map, out);
  return out;
}

class reader {
 public:
  reader(const std::string& file, const std::string& text) : file_(file), text_(text) {}

  [[noreturn]] void fail(int line, const std::string& message) const { throw config_error(file_, line, message); }

  // envoyproxy/ratelimit's key check, over the whole file before anything is read: keys are strings of the format,
  // list items are maps, values are not floating-point numbers. `metadata` is not looked into.
  void check_keys(const Node& map, level at) const {
    for (const pair_of& p : pairs(map)) {
      check_closed(p.key);
      check_closed(p.value);
      if (!p.key.IsScalar() || kind_of(p.key) != scalar_kind::string) {
        fail(line_of(p.key), "key " + (p.key.IsScalar() ? p.key.Scalar() : describe(p.key)) +
                                 " is not a string; keys are names such as " + std::string(keys_of(at)));
      }
      const std::string& name = p.key.Scalar();
      if (one_of(extension_keys, name)) {
        if (at != level::rate_limit)
          fail(line_of(p.key), "key \"" + name + "\" belongs inside rate_limit (an extension of admit's); here use " +
                                   std::string(keys_of(at)));
      } else if (!one_of(format_keys, name)) {
        fail(line_of(p.key), "unknown key \"" + name + "\"; use " + std::string(keys_of(at)));
      }
      if (name == "metadata") continue;
      const level inner = name == "descriptors"  ? level::descriptor
                          : name == "rate_limit" ? level::rate_limit
                          : name == "replaces"   ? level::replaces
                                                 : level::other;
      if (p.value.IsSequence() && name != "descriptors" && name != "replaces") {
        // A list where one value belongs ("domain: [x]"): said as such, not as a list whose items should be maps.
        fail(line_of(p.value), "\"" + name + "\" must be one value, not " + describe(p.value));
      }
      if (p.value.IsSequence()) {
        for (const Node& item : p.value) {
          check_closed(item);
          if (!item.IsMap())
            fail(item.IsNull() ? line_before(item) : line_of(item),
                 "\"" + name + "\" lists " + describe(item) + "; each item of a list is a map, e.g. " +
                     (name == "replaces" ? "- name: NAME" : "- key: NAME"));
          check_keys(item, inner);
        }
      } else if (p.value.IsMap()) {
        check_keys(p.value, inner);
      } else if (!p.value.IsNull()) {
        const scalar_kind k = kind_of(p.value);
        const auto i = integer_of(p.value);
        // (A count is a whole number: quoting one would not help. Any other value may be a string, quoted. A number of
        // more digits than 64 bits hold reads as floating, as in Go's decoder: for a count, the same answer.)
        const bool count =
            name == "requests_per_unit" || name == "burst" || name == "concurrency" || name == "prefetch";
        if (k == scalar_kind::floating && count)
          fail(line_of(p.value),
               "\"" + name + "\" is " + describe(p.value) + "; it must be a whole number from 0 to 4294967295");
        if (k == scalar_kind::floating)
          fail(line_of(p.value), "\"" + name + "\" is " + describe(p.value) +
                                     ", which the format does not take; use a whole number, true/false, or a string "
                                     "(quote it: \"" +
                                     p.value.Scalar() + "\")");
        if (i && !i->negative && i->magnitude > std::uint64_t{INT64_MAX})
          fail(line_of(p.value), "\"" + name + "\" is " + describe(p.value) +
                                     ", larger than the format takes (at most 9223372036854775807" +
                                     (count ? ")" : "; quote it if it is a string)"));
      }
    }
  }

  // The typed reads. A null value (`key:` with nothing after it) reads as the type's zero, as in go-yaml v2.
  std::string string_of(const pair_of& p) const {
    if (p.value.IsMap() || p.value.IsSequence())
      fail(where(p), "\"" + p.key.Scalar() + "\" must be a string, not " + describe(p.value));
    return p.value.IsNull() || kind_of(p.value) == scalar_kind::null ? std::string() : p.value.Scalar();
  }
  bool bool_of(const pair_of& p) const {
    if (p.value.IsNull()) return false;
    const auto b = p.value.IsScalar() ? boolean_of(p.value) : std::nullopt;
    if (!b) fail(where(p), "\"" + p.key.Scalar() + "\" must be true or false, not " + describe(p.value));
    return *b;
  }
  std::uint32_t uint32_of(const pair_of& p) const {
    if (p.value.IsNull() || (p.value.IsScalar() && kind_of(p.value) == scalar_kind::null)) return 0;
    const auto i = p.value.IsScalar() ? integer_of(p.value) : std::nullopt;
    if (!i || (i->negative && i->magnitude != 0) || i->magnitude > UINT32_MAX)
      fail(where(p),
           "\"" + p.key.Scalar() + "\" must be a whole number from 0 to 4294967295, not " + describe(p.value));
    return static_cast<std::uint32_t>(i->magnitude);
  }
  std::vector<Node> list_of(const pair_of& p) const {
    if (p.value.IsNull()) return {};
    if (!p.value.IsSequence())
      fail(where(p), "\"" + p.key.Scalar() + "\" must be a list of maps, not " + describe(p.value));
    return {p.value.begin(), p.value.end()};
  }

  rate_limit_doc rate_limit(const pair_of& at) const {
    rate_limit_doc r;
    r.line = line_of(at.key);
    for (const pair_of& p : pairs(at.value)) {
      const std::string& k = p.key.Scalar();
      const int line = where(p);
      if (k == "unit") {
        r.unit = string_of(p);
        r.unit_line = line;
      } else if (k == "requests_per_unit") {
        r.requests_per_unit = uint32_of(p);
        r.requests_per_unit_line = line;
      } else if (k == "unlimited") {
        r.unlimited = bool_of(p);
        r.unlimited_line = line;
      } else if (k == "name") {
        r.name = string_of(p);
      } else if (k == "replaces") {
        r.replaces.clear();
        for (const Node& item : list_of(p)) {
          std::string name;
          int name_line = line_of(item);
          for (const pair_of& q : pairs(item)) {
            if (q.key.Scalar() != "name") continue;
            name = string_of(q);
            name_line = where(q);
          }
          r.replaces.emplace_back(std::move(name), name_line);
        }
      } else if (k == "algorithm") {
        r.algorithm = string_of(p);
        r.algorithm_line = line;
      } else if (k == "burst") {
        r.burst = uint32_of(p);
        r.burst_line = line;
      } else if (k == "concurrency") {
        r.concurrency = uint32_of(p);
        r.concurrency_line = line;
      } else if (k == "over_limit_hits") {
        r.over_limit_hits = string_of(p);
        r.over_limit_hits_line = line;
      } else if (k == "prefetch") {
        r.prefetch = uint32_of(p);
        r.prefetch_line = line;
      } else {
        ignore(line, k, "inside rate_limit", true);
      }
    }
    return r;
  }

  descriptor_doc descriptor(const Node& item) const {
    descriptor_doc d;
    d.line = line_of(item);
    for (const pair_of& p : pairs(item)) {
      const std::string& k = p.key.Scalar();
      if (k == "key") {
        d.key = string_of(p);
        d.key_line = where(p);
      } else if (k == "value") {
        d.value = string_of(p);
      } else if (k == "rate_limit") {
        if (p.value.IsNull()) {
          d.rate_limit.reset();
        } else if (!p.value.IsMap()) {
          fail(where(p), "\"rate_limit\" must be a map (unit, requests_per_unit...), not " + describe(p.value));
        } else {
          d.rate_limit = rate_limit(p);
        }
      } else if (k == "descriptors") {
        d.descriptors.clear();
        for (const Node& child : list_of(p)) d.descriptors.push_back(descriptor(child));
      } else if (k == "shadow_mode") {
        d.shadow_mode = bool_of(p);
      } else if (k == "detailed_metric") {
        d.detailed_metric = bool_of(p);
      } else if (k == "value_to_metric") {
        d.value_to_metric = bool_of(p);
      } else if (k == "share_threshold") {
        d.share_threshold = bool_of(p);
        d.share_threshold_line = where(p);
      } else {
        check_ignored(p);
        if (k != "quota_mode" && k != "metadata") ignore(where(p), k, "in a descriptor", false);
      }
    }
    return d;
  }

  file_doc file(const Node& root) const {
    file_doc f;
    if (root.IsNull()) return f;
    check_closed(root);
    if (!root.IsMap()) fail(line_of(root), "the file must be a map with domain and descriptors, not " + describe(root));
    f.first_line = line_of(root);
    check_keys(root, level::root);
    for (const pair_of& p : pairs(root)) {
      const std::string& k = p.key.Scalar();
      if (k == "domain") {
        f.domain = string_of(p);
        f.domain_line = where(p);
      } else if (k == "descriptors") {
        f.descriptors.clear();
        for (const Node& item : list_of(p)) f.descriptors.push_back(descriptor(item));
      } else {
        ignore(where(p), k, "at the top of the file", false);
      }
    }
    f.ignored = std::move(ignored_);
    return f;
  }

 private:
  // The line of a field: its value's, or its key's when the value is null (yaml-cpp marks a null by the next token).
  static int where(const pair_of& p) { return p.value.IsNull() ? line_of(p.key) : line_of(p.value); }

  // A key of the format where it means nothing: noted for a warning, with where it belongs when that is plain (a
  // descriptor's key inside rate_limit, a rate_limit's key outside it).
  void ignore(int line, const std::string& key, const char* where_it_is, bool inside_rate_limit) const {
    const bool descriptors_own = key == "shadow_mode" || key == "detailed_metric" || key == "value_to_metric" ||
                                 key == "share_threshold" || key == "key" || key == "value" || key == "descriptors";
    std::string message = "\"" + key + "\" means nothing " + where_it_is + " and is ignored";
    if (inside_rate_limit && descriptors_own) message += "; it belongs to the descriptor, beside rate_limit";
    if (!inside_rate_limit && (key == "unit" || key == "requests_per_unit" || key == "unlimited"))
      message += "; it belongs inside rate_limit";
    ignored_.emplace_back(line, std::move(message));
  }

  // A descriptor's key that is read and ignored (a format key that belongs elsewhere is ignored too: go-yaml v2
  // ignores a struct's unknown fields once the key check passed). quota_mode and metadata are a descriptor's fields
  // there, so their types are checked as go-yaml v2 checks them: a boolean, a map.
  void check_ignored(const pair_of& p) const {
    const std::string& k = p.key.Scalar();
    if (k == "quota_mode") (void)bool_of(p);
    if (k == "metadata" && !p.value.IsNull() && !p.value.IsMap())
      fail(where(p), "\"metadata\" must be a map, not " + describe(p.value));
  }

  // yaml-cpp 0.7 takes a quoted scalar left open at the end of the file as closed there; go-yaml v2 (and YAML) refuse
  // it. So each quoted scalar read is looked for its closing quote in the text, from the opening one its mark points
  // at: '' is a quote inside '...', and \\x an escape inside "...".
  void check_closed(const Node& n) const {
    if (!n.IsScalar() || n.Tag() != "!") return;
    const YAML::Mark m = n.Mark();
    if (m.is_null() || m.pos < 0 || static_cast<std::size_t>(m.pos) >= text_.size()) return;
    const auto open = static_cast<std::size_t>(m.pos);
    const char quote = text_[open];
    if (quote != '\'' && quote != '"') return;
    for (std::size_t i = open + 1; i < text_.size(); ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;
      } else if (text_[i] == quote) {
        if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;
        } else {
          return;
        }
      }
    }
    fail(line_of(n),
         std::string("the file is not valid YAML: the quoted scalar that starts here is never closed (add ") + quote +
             ")");
  }

  // The line of a null list item (`-` and nothing after it): yaml-cpp marks it at the token after it, so the line is
  // that of the last character written before that mark.
  int line_before(const Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null() || m.pos < 0) return line_of(n);
    std::size_t end = std::min(static_cast<std::size_t>(m.pos), text_.size());
    while (end > 0 &&
           (text_[end - 1] == ' ' || text_[end - 1] == '\t' || text_[end - 1] == '\n' || text_[end - 1] == '\r'))
      --end;
    return 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
  }

  const std::string& file_;
  const std::string& text_;
  mutable std::vector<std::pair<int, std::string>> ignored_;  // see ignore()
};

}  // namespace

file_doc read_file(const std::string& file, const std::string& text) {
  const reader r(file, text);
  std::vector<Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() || e.mark.line < 0 ? 0 : e.mark.line + 1;
    throw config_error(file, line, "the file is not valid YAML: " + e.msg);
  }
  file_doc f = r.file(documents.empty() ? Node() : documents.front());
  // A file is one domain, read from its first document, as envoyproxy/ratelimit reads it; a second one, after `---`,
  // would be dropped unseen.
  for (std::size_t i = 1; i < documents.size(); ++i) {
    if (documents[i].IsNull()) continue;
    const YAML::Mark m = documents[i].Mark();
    f.ignored.emplace_back(m.is_null() || m.line < 0 ? 0 : m.line + 1,
                           "a second YAML document (after ---) is ignored: a file holds one domain, in its first");
    break;
  }
  return f;
}

}  // namespace admit::serve::yaml
