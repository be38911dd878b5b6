// serve/config/configuration.hpp — `admit serve`'s loaded configuration: envoyproxy/ratelimit's YAML files (one domain
// per file, nested descriptors) with its validation and its matching rules, plus admit's extensions (rule.hpp).
//
// A configuration is immutable once loaded; the server holds it by std::shared_ptr<const configuration> and a reload
// swaps the pointer, so a decision in flight finishes on the configuration it started with.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "serve/config/rule.hpp"

namespace admit::serve {

// Why a file was refused (thrown by configuration::load*, as admit throws std::invalid_argument for every invalid
// configuration): the file (as given), the 1-based line where there is one (0 otherwise), and the problem in words.
// what() is "file:line: message" (or "file: message" when line is 0), e.g.
// `config.yaml:7: invalid rate limit unit "fortnight"; use second, minute, hour, day, week, month or year`.
class config_error : public std::invalid_argument {
 public:
  config_error(std::string file, int line, std::string message);
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] int line() const noexcept { return line_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::string file_;
  int line_;
  std::string message_;
};

// One entry of a request's descriptor: `{key, value}`.
struct descriptor_entry {
  std::string key;
  std::string value;
};

// The rule a descriptor matched, and the key its counter lives under.
struct rule_match {
  const rate_limit_rule* rule = nullptr;  // owned by the configuration; never null in a returned match
  // The counter's key, unique across the configuration's domains: domain, then key and value per entry, as
  // envoyproxy/ratelimit builds its cache key (without the window). Where share_threshold applies, the entry's value
  // is the rule's wildcard pattern, so every matching value shares one counter. Unambiguous whatever the strings
  // hold: each part is written as its length in decimal, ':', then its bytes ("11:test-domain3:key6:value1"), so no
  // two different (domain, entries) give the same key. It names the descriptor path only, not the rule's unit or
  // algorithm: a backend that keeps state across reloads adds those.
  std::string counter_key;
  // envoyproxy/ratelimit's statistics key for this match (its Stats.Key): "domain.key_value.key" with the rule's
  // wildcard where one matched, the request's values where detailed_metric or value_to_metric ask for them, the
  // share_threshold wildcard where it applies. Equal to rule->full_key when none of these apply.
  std::string metric_key;
};

// Something in a file that was accepted but deserves a word: a key of the format where it means nothing, or a rule
// whose limit is likely not what was meant (a rate_limit without requests_per_unit: a limit of 0).
struct config_warning {
  std::string file;
  int line = 0;
  std::string message;
};

class configuration {
 public:
  // Loads every `*.yaml` and `*.yml` file directly in `dir` (as envoyproxy/ratelimit does for RUNTIME_ROOT/
  // RUNTIME_SUBDIRECTORY/config; a link to a file is read; a name that starts with '.' is skipped; other files and
  // subdirectories are not read, each named in warnings()),
  // in name order; file names in rules and errors are `dir / name`. A directory without such files is an empty
  // configuration (no domain: every request is for an unknown domain), as envoyproxy/ratelimit loads it. Refuses,
  // with the first problem found: unreadable directory or file (line 0, the system's reason), YAML syntax error,
  // unknown key, empty domain, duplicate domain (across files), empty key, duplicate descriptor (same key and value at
  // one level), bad or missing unit, `unlimited` with a unit, empty or self-naming `replaces`, non-string keys,
  // non-map list items, values of the wrong type (a negative or fractional requests_per_unit, a boolean that is not
  // one), `share_threshold` without a wildcard, and admit's own checks of the extensions. As envoyproxy/ratelimit,
  // it accepts and ignores a key of the format written where it means nothing (e.g. `unit` beside `rate_limit`) and
  // takes the last of a key given twice in one map; `quota_mode` and `metadata` are read and ignored. A key written
  // where it means nothing is in warnings(). Throws config_error.
  [[nodiscard]] static std::shared_ptr<const configuration> load_directory(const std::filesystem::path& dir);
  // Loads from YAML texts: {file name, text} (tests, and the unit of load_directory); `warnings` come first in
  // warnings(). Throws config_error.
  [[nodiscard]] static std::shared_ptr<const configuration> load(
      std::span<const std::pair<std::string, std::string>> files, std::vector<config_warning> warnings = {});

  // The rule for `entries` in `domain` under envoyproxy/ratelimit's matching: walk the descriptor tree entry by entry,
  // at each level taking the descriptor whose key and value equal the entry's, else the first descriptor in file order
  // whose wildcard value matches (`*` anywhere in the value, each matching any run of characters), else the
  // descriptor with the entry's key and no value; the rule is the one at the node reached by the last entry, when
  // that node has one. Returns an empty optional when the domain is unknown, `entries` is empty, the path leaves the
  // tree, or the node has no rate_limit (the descriptor is then not limited: "whitelisted"). Thread-safe (const);
  // O(entries x (log width + wildcards at each level)).
  [[nodiscard]] std::optional<rule_match> find(std::string_view domain,
                                               std::span<const descriptor_entry> entries) const;

  [[nodiscard]] bool has_domain(std::string_view domain) const;
  // Every rule, indexed by rate_limit_rule::index.
  [[nodiscard]] const std::vector<rate_limit_rule>& rules() const noexcept;
  // What the files hold that was accepted but means nothing (see load_directory), in file and line order.
  [[nodiscard]] const std::vector<config_warning>& warnings() const noexcept { return warnings_; }
  // The loaded configuration as JSON text, for GET /rules: {"domains": [{"domain", "file", "line", "descriptors":
  // [{"key", "value"?, "line", "share_threshold"?, "value_to_metric"?, "rate_limit"?: {"index", "full_key",
  // "algorithm", "file", "line", "shadow_mode", "detailed_metric", "name"?, "replaces"?, then "unit" +
  // "requests_per_unit" (+ "burst"), or "unlimited", or "concurrency"}, "descriptors"?: [...]}]}], "rules": count}.
  // Domains by name, descriptors in file order.
  [[nodiscard]] std::string to_json() const;

  // Implementation detail (public so the loader can build it): the descriptor tree.
  struct node;
  struct domain_tree;
  explicit configuration(std::vector<domain_tree> domains, std::vector<rate_limit_rule> rules,
                         std::vector<config_warning> warnings = {});
  ~configuration();

 private:
  std::vector<domain_tree> domains_;
  std::vector<rate_limit_rule> rules_;
  std::vector<config_warning> warnings_;
};

}  // namespace admit::serve
