#include "serve/config/configuration.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "serve/config/tree.hpp"
#include "serve/config/yaml_loader.hpp"

namespace admit::serve {

namespace {

std::string what_of(const std::string& file, int line, const std::string& message) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " + message : file + ": " + message;
}

// Appends `s` as its length in decimal, ':', then its bytes: a prefix-free encoding, so a sequence of parts written
// this way reads back one way only (counter keys of different descriptors never collide, whatever '.', '_' or ':'
// their keys and values hold).
void append_part(std::string& out, std::string_view s) {
  char digits[20];
  const auto end = std::to_chars(std::begin(digits), std::end(digits), s.size()).ptr;
  out.append(digits, end).append(1, ':').append(s);
}

// At least the bytes append_part writes for `s` (its length takes at most 20 digits).
std::size_t part_size_bound(std::string_view s) { return s.size() + 21; }

std::string_view trim_prefix(std::string_view s, std::string_view key) {
  if (s.size() > key.size() && s.substr(0, key.size()) == key && s[key.size()] == '_') s.remove_prefix(key.size() + 1);
  return s;
}

// The domains are sorted by name (the constructor sorts them).
const configuration::domain_tree* find_domain(const std::vector<configuration::domain_tree>& domains,
                                              std::string_view name) {
  const auto d = std::lower_bound(domains.begin(), domains.end(), name,
                                  [](const configuration::domain_tree& t, std::string_view n) { return t.name < n; });
  return d == domains.end() || d->name != name ? nullptr : &*d;
}

nlohmann::json rule_json(const rate_limit_rule& r) {
  nlohmann::json j{
      {"index", r.index}, {"full_key", r.full_key},       {"algorithm", to_string(r.algorithm)}, {"file", r.file},
      {"line", r.line},   {"shadow_mode", r.shadow_mode}, {"detailed_metric", r.detailed_metric}};
  if (!r.name.empty()) j["name"] = r.name;
  if (!r.replaces.empty()) j["replaces"] = r.replaces;
  if (r.algorithm == algorithm::concurrency) {
    j["concurrency"] = r.concurrency;
  } else if (r.unlimited) {
    j["unlimited"] = true;
  } else {
    j["unit"] = to_string(r.per);
    j["requests_per_unit"] = r.requests_per_unit;
    if (r.burst) j["burst"] = *r.burst;
    j["over_limit_hits"] = to_string(over_limit_hits_of(r));
    j["prefetch"] = r.prefetch;
  }
  return j;
}

nlohmann::json node_json(const configuration::node& n, const std::vector<rate_limit_rule>& rules) {
  nlohmann::json j{{"key", n.key}, {"line", n.line}};
  if (!n.value.empty()) j["value"] = n.value;
  if (n.share_threshold) j["share_threshold"] = true;
  if (n.value_to_metric) j["value_to_metric"] = true;
  if (n.rule) j["rate_limit"] = rule_json(rules[*n.rule]);
  if (!n.children.empty()) {
    j["descriptors"] = nlohmann::json::array();
    for (const configuration::node& c : n.children) j["descriptors"].push_back(node_json(c, rules));
  }
  return j;
}

}  // namespace

config_error::config_error(std::string file, int line, std::string message)
    : std::invalid_argument(what_of(file, line, message)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

bool wildcard_match(const std::vector<std::string>& parts, std::string_view text) noexcept {
  if (parts.size() == 1) return parts.front() == text;
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  if (text.size() < first.size() + last.size()) return false;
  if (text.substr(0, first.size()) != first || text.substr(text.size() - last.size()) != last) return false;
  // The middle parts, in order, in what lies between the first and the last.
  std::string_view rest = text.substr(first.size(), text.size() - first.size() - last.size());
  for (std::size_t i = 1; i + 1 < parts.size(); ++i) {
    const auto at = rest.find(parts[i]);
    if (at == std::string_view::npos) return false;
    rest.remove_prefix(at + parts[i].size());
  }
  return true;
}

configuration::configuration(std::vector<domain_tree> domains, std::vector<rate_limit_rule> rules,
                             std::vector<config_warning> warnings)
    : domains_(std::move(domains)), rules_(std::move(rules)), warnings_(std::move(warnings)) {
  std::sort(domains_.begin(), domains_.end(),
            [](const domain_tree& a, const domain_tree& b) { return a.name < b.name; });
}

configuration::~configuration() = default;

std::shared_ptr<const configuration> configuration::load(std::span<const std::pair<std::string, std::string>> files,
                                                         std::vector<config_warning> warnings) {
  std::vector<domain_tree> domains;
  std::vector<rate_limit_rule> rules;
  for (const auto& [name, text] : files) detail::load_yaml_file(name, text, domains, rules, warnings);
  return std::make_shared<const configuration>(std::move(domains), std::move(rules), std::move(warnings));
}

namespace {

// The offset of the first byte that makes `text` not UTF-8 text: a NUL, or a byte outside a well-formed UTF-8
// sequence (overlong forms, surrogates and code points above U+10FFFF included). nullopt when it is text.
std::optional<std::size_t> first_non_text_byte(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == 0) return i;
    if (b < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b >= 0xC2 && b <= 0xDF) {
      n = 1, cp = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2, cp = b & 0x0Fu;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3, cp = b & 0x07u;
    } else {
      return i;
    }
    if (i + n >= text.size()) return i;  // cut short by the end
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0u) != 0x80u) return i;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    const std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::nullopt;
}

}  // namespace

std::shared_ptr<const configuration> configuration::load_directory(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const std::string dir_name = dir.string();
  std::vector<fs::path> paths;
  std::vector<config_warning> not_read;  // what envoyproxy/ratelimit would read and admit does not: said, not silent
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw config_error(dir_name, 0, "cannot read the configuration directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    // `*.yaml` and `*.yml` directly in the directory: envoyproxy/ratelimit documents the first, and its runtime loader
    // reads every file of the tree. What is not read (another name, a file in a subdirectory) is named in a warning,
    // where ignoring it in silence would answer OK to what it limits. Hidden names (a Kubernetes ConfigMap's `..data`)
    // are skipped without a word. A directory named x.yaml is skipped; anything that is a file or a link to one is
    // read.
    if (name.starts_with('.')) continue;  // (a hidden x.yaml too: an editor's lock link, often dangling)
    std::error_code type_ec;
    const bool directory = fs::is_directory(it->status(type_ec));
    const bool yaml = (name.size() > 5 && name.ends_with(".yaml")) || (name.size() > 4 && name.ends_with(".yml"));
    if (yaml && !directory) {
      paths.push_back(p);
    } else {
      not_read.push_back(
          {p.string(), 0,
           directory ? "a subdirectory: not read (only the *.yaml and *.yml files directly in the directory are)"
                     : "not read: only *.yaml and *.yml files are (rename it if it holds rules)"});
    }
  }
  if (ec) throw config_error(dir_name, 0, "cannot read the configuration directory: " + ec.message());
  std::sort(paths.begin(), paths.end());
  std::sort(not_read.begin(), not_read.end(),
            [](const config_warning& a, const config_warning& b) { return a.file < b.file; });
  std::vector<std::pair<std::string, std::string>> files;
  files.reserve(paths.size());
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    const int open_errno = errno;
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in || in.bad()) {
      throw config_error(p.string(), 0,
                         std::string("cannot read the file: ") + std::strerror(in.is_open() ? EIO : open_errno));
    }
    std::string content = std::move(text).str();
    if (const auto bad = first_non_text_byte(content)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(content[*bad]));
      throw config_error(p.string(), 0,
                         "not a text file: byte " + std::string(hex) + " at offset " + std::to_string(*bad) +
                             " is not UTF-8 text (a configuration file is YAML, in UTF-8)");
    }
    files.emplace_back(p.string(), std::move(content));
  }
  return load(files, std::move(not_read));
}

std::optional<rule_match> configuration::find(std::string_view domain,
                                              std::span<const descriptor_entry> entries) const {
  const domain_tree* d = find_domain(domains_, domain);
  if (d == nullptr || entries.empty()) return std::nullopt;

  // One pass over the entries, as envoyproxy/ratelimit's GetLimit: at each level the exact `key_value`, else the
  // first wildcard composite (file order) matching `key_value`, else `key` alone. For each entry we keep what the
  // counter key and the metric keys need: the share_threshold pattern (when the entry matched a wildcard whose
  // descriptor has share_threshold), and the entry's part of the value_to_metric key.
  std::string composite;
  std::string value_to_metric_key(domain);
  std::vector<std::string_view> shared;  // sized on the first share_threshold match (rare): no allocation otherwise
  bool any_shared = false;
  const node* level = &d->root;
  const node* reached = nullptr;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const descriptor_entry& e = entries[i];
    composite.assign(e.key).append("_").append(e.value);
    const node* next = level->child(composite);
    const node::wildcard* matched_wildcard = nullptr;
    if (next == nullptr) {
      for (const node::wildcard& w : level->wildcards) {
        if (wildcard_match(w.parts, composite)) {
          next = &level->children[w.child];
          matched_wildcard = &w;
          break;
        }
      }
    }
    const bool matched_by_value = next != nullptr;
    if (next == nullptr) next = level->child(e.key);
    if (next == nullptr) return std::nullopt;

    std::string_view metric_value;
    if (matched_wildcard != nullptr) {
      const std::string_view pattern = trim_prefix(next->composite, e.key);
      if (next->share_threshold) {
        shared.resize(entries.size());
        shared[i] = pattern;
        any_shared = true;
        metric_value = pattern;
      } else {
        metric_value = next->value_to_metric ? std::string_view(e.value) : pattern;
      }
    } else if (matched_by_value || next->value_to_metric) {
      metric_value = e.value;
    }
    value_to_metric_key.append(".").append(e.key);
    if (!metric_value.empty()) value_to_metric_key.append("_").append(metric_value);

    if (i + 1 == entries.size()) {
      reached = next;
    } else if (next->children.empty()) {
      return std::nullopt;  // the request is deeper than the tree
    }
    level = next;
  }
  if (reached == nullptr || !reached->rule) return std::nullopt;

  rule_match m;
  m.rule = &rules_[*reached->rule];
  // Entry i's value in the counter and metric keys: its share_threshold pattern, else its own.
  const auto value_of = [&](std::size_t i) {
    return any_shared && !shared[i].empty() ? shared[i] : std::string_view(entries[i].value);
  };
  std::size_t key_size = part_size_bound(domain);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    key_size += part_size_bound(entries[i].key) + part_size_bound(value_of(i));
  }
  m.counter_key.reserve(key_size);  // one allocation at most
  append_part(m.counter_key, domain);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    append_part(m.counter_key, entries[i].key);
    append_part(m.counter_key, value_of(i));
  }
  if (m.rule->detailed_metric) {
    // detailed_metric: every entry's own value ("key_" even when empty), except share_threshold patterns.
    m.metric_key = domain;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      m.metric_key.append(".").append(entries[i].key);
      const std::string_view v = value_of(i);
      if (!any_shared || !v.empty()) m.metric_key.append("_").append(v);
    }
  } else {
    m.metric_key = std::move(value_to_metric_key);
  }
  return m;
}

bool configuration::has_domain(std::string_view domain) const { return find_domain(domains_, domain) != nullptr; }

const std::vector<rate_limit_rule>& configuration::rules() const noexcept { return rules_; }

std::string configuration::to_json() const {
  nlohmann::json domains = nlohmann::json::array();
  for (const domain_tree& d : domains_) {
    nlohmann::json j{{"domain", d.name}, {"file", d.file}, {"line", d.line}, {"descriptors", nlohmann::json::array()}};
    for (const node& n : d.root.children) j["descriptors"].push_back(node_json(n, rules_));
    domains.push_back(std::move(j));
  }
  return nlohmann::json{{"domains", std::move(domains)}, {"rules", rules_.size()}}.dump();
}

}  // namespace admit::serve
