// serve/config/yaml_document.hpp — a configuration file as written, before its meaning is checked: the YAML read with
// yaml-cpp, its keys checked against the format's key list, and each field read with the type the format gives it
// (as envoyproxy/ratelimit decodes the file into its structs: strings, YAML 1.1 booleans, unsigned 32-bit integers,
// lists of maps). Every field keeps the line it was written on for messages. Internal.
//
// Keys envoyproxy/ratelimit accepts but admit does not act on are read and ignored: `quota_mode`, `metadata` (any
// map). `value_to_metric` is used for the metric key only (configuration::find).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace admit::serve::yaml {

struct rate_limit_doc {
  int line = 0;  // the `rate_limit:` key
  std::string unit;
  int unit_line = 0;  // 0: no `unit` key
  std::uint32_t requests_per_unit = 0;
  int requests_per_unit_line = 0;  // 0: no `requests_per_unit` key
  bool unlimited = false;
  int unlimited_line = 0;
  std::string name;
  std::vector<std::pair<std::string, int>> replaces;  // each `- name:` and its line
  // admit's extensions (accepted only inside rate_limit)
  std::optional<std::string> algorithm;
  int algorithm_line = 0;
  std::optional<std::uint32_t> burst;
  int burst_line = 0;
  std::optional<std::string> over_limit_hits;
  int over_limit_hits_line = 0;
  std::optional<std::uint32_t> prefetch;
  int prefetch_line = 0;
  std::optional<std::uint32_t> concurrency;
  int concurrency_line = 0;
};

struct descriptor_doc {
  int line = 0;  // the list item
  std::string key;
  int key_line = 0;
  std::string value;
  std::optional<rate_limit_doc> rate_limit;
  bool shadow_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;
  int share_threshold_line = 0;
  std::vector<descriptor_doc> descriptors;
};

struct file_doc {
  std::string domain;
  int domain_line = 0;  // 0: no `domain` key
  int first_line = 0;   // the file's first key (0: empty file)
  std::vector<descriptor_doc> descriptors;
  // Keys of the format found where they mean nothing (`shadow_mode` inside rate_limit, `unit` in a descriptor):
  // accepted and ignored, as envoyproxy/ratelimit does, and told as warnings. {line, what to say}.
  std::vector<std::pair<int, std::string>> ignored;
};

// Reads `text` as one configuration file. Throws config_error(file, line, why) for YAML that does not parse, a key
// that is not a string or not in the format, a list item that is not a map, a floating-point value, or a field of
// the wrong type; the checks of meaning (empty domain, units, duplicates...) are the loader's.
[[nodiscard]] file_doc read_file(const std::string& file, const std::string& text);

}  // namespace admit::serve::yaml
