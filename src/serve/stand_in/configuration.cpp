// A stand-in for the configuration loader (see ../CMakeLists.txt): envoyproxy/ratelimit's YAML without wildcards,
// replaces, shadow mode or admit's extensions — enough for the transports' end-to-end test. Deleted once config/
// lands.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serve/config/configuration.hpp"

namespace admit::serve {

struct configuration::node {
  std::map<std::string, node> children;  // "key" or "key_value"
  std::optional<std::size_t> rule;
};
struct configuration::domain_tree {
  std::string name;
  node root;
};

namespace {

[[noreturn]] void where(const std::string& file, const YAML::Node& n, std::string message) {
  throw config_error(file, static_cast<int>(n.Mark().line) + 1, std::move(message));
}

unit parse_unit(const std::string& file, const YAML::Node& n) {
  std::string s = n.as<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (unit u : {unit::second, unit::minute, unit::hour, unit::day, unit::week, unit::month, unit::year}) {
    if (to_string(u) == s) return u;
  }
  where(file, n, "invalid rate limit unit \"" + n.as<std::string>() + "\"");
}

void load_descriptors(const std::string& file, const YAML::Node& list, const std::string& prefix,
                      configuration::node& into, std::vector<rate_limit_rule>& rules) {
  for (const YAML::Node& d : list) {
    if (!d.IsMap()) where(file, d, "a descriptor must be a map");
    std::string key, value;
    for (const auto& kv : d) {
      const auto k = kv.first.as<std::string>();
      if (k != "key" && k != "value" && k != "rate_limit" && k != "descriptors") {
        where(file, kv.first, "unknown key \"" + k + "\"");
      }
    }
    if (!d["key"] || d["key"].as<std::string>().empty()) where(file, d, "descriptor has empty key");
    key = d["key"].as<std::string>();
    if (d["value"]) value = d["value"].as<std::string>();
    const std::string child_key = value.empty() ? key : key + "_" + value;
    if (into.children.count(child_key) != 0) where(file, d, "duplicate descriptor composite key '" + child_key + "'");
    configuration::node& child = into.children[child_key];
    const std::string full = prefix + "." + child_key;
    if (const YAML::Node rl = d["rate_limit"]) {
      rate_limit_rule r;
      r.full_key = full;
      r.file = file;
      r.line = static_cast<int>(rl.Mark().line) + 1;
      if (rl["name"]) r.name = rl["name"].as<std::string>();
      if (rl["unlimited"]) r.unlimited = rl["unlimited"].as<bool>();
      if (!r.unlimited) {
        if (!rl["unit"]) where(file, rl, "rate limit has no unit");
        r.per = parse_unit(file, rl["unit"]);
        r.requests_per_unit = rl["requests_per_unit"] ? rl["requests_per_unit"].as<std::uint32_t>() : 0;
      }
      r.index = rules.size();
      child.rule = r.index;
      rules.push_back(std::move(r));
    }
    if (d["descriptors"]) load_descriptors(file, d["descriptors"], full, child, rules);
  }
}

}  // namespace

config_error::config_error(std::string file, int line, std::string message)
    : std::invalid_argument(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + message),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

std::shared_ptr<const configuration> configuration::load_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw config_error(dir.string(), 0, "not a readable directory");
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".yaml") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& p : paths) {
    std::ifstream in(p);
    std::ostringstream text;
    text << in.rdbuf();
    files.emplace_back(p.string(), text.str());
  }
  return load(files);
}

std::shared_ptr<const configuration> configuration::load(std::span<const std::pair<std::string, std::string>> files) {
  std::vector<domain_tree> domains;
  std::vector<rate_limit_rule> rules;
  for (const auto& [file, text] : files) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw config_error(file, static_cast<int>(e.mark.line) + 1, e.msg);
    }
    if (!doc["domain"] || doc["domain"].as<std::string>().empty())
      throw config_error(file, 1, "config file has no domain");
    domain_tree t;
    t.name = doc["domain"].as<std::string>();
    for (const auto& d : domains) {
      if (d.name == t.name) where(file, doc["domain"], "duplicate domain '" + t.name + "' in config file");
    }
    if (doc["descriptors"]) load_descriptors(file, doc["descriptors"], t.name, t.root, rules);
    domains.push_back(std::move(t));
  }
  return std::make_shared<configuration>(std::move(domains), std::move(rules));
}

configuration::configuration(std::vector<domain_tree> domains, std::vector<rate_limit_rule> rules)
    : domains_(std::move(domains)), rules_(std::move(rules)) {}
configuration::~configuration() = default;

std::optional<rule_match> configuration::find(std::string_view domain,
                                              std::span<const descriptor_entry> entries) const {
  for (const auto& d : domains_) {
    if (d.name != domain) continue;
    const node* at = &d.root;
    std::string key(domain);
    for (const auto& e : entries) {
      auto it = at->children.find(e.key + "_" + e.value);
      if (it != at->children.end()) {
        key += "_" + e.key + "_" + e.value;
      } else {
        it = at->children.find(e.key);
        if (it == at->children.end()) return std::nullopt;
        key += "_" + e.key + "_" + e.value;
      }
      at = &it->second;
    }
    if (!at->rule) return std::nullopt;
    return rule_match{&rules_[*at->rule], key};
  }
  return std::nullopt;
}

bool configuration::has_domain(std::string_view domain) const {
  return std::any_of(domains_.begin(), domains_.end(), [&](const domain_tree& d) { return d.name == domain; });
}

const std::vector<rate_limit_rule>& configuration::rules() const noexcept { return rules_; }

std::string configuration::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rules_) {
    out.push_back({{"key", r.full_key},
                   {"name", r.name},
                   {"requests_per_unit", r.requests_per_unit},
                   {"unit", to_string(r.per)},
                   {"file", r.file},
                   {"line", r.line}});
  }
  return nlohmann::json{{"rules", out}}.dump();
}

}  // namespace admit::serve
