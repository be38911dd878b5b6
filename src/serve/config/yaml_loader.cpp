#include "serve/config/yaml_loader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <utility>

#include "serve/config/yaml_document.hpp"

namespace admit::serve::detail {

namespace {

constexpr std::string_view units_in_words = "use second, minute, hour, day, week, month or year";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// envoyproxy/ratelimit takes the unit's name in any case ("Second", "MINUTE"); "unknown" is not a unit.
unit parse_unit(std::string_view text) {
  const std::string u = lower(text);
  constexpr std::array<unit, 7> all{unit::second, unit::minute, unit::hour, unit::day,
                                    unit::week,   unit::month,  unit::year};
  for (unit candidate : all)
    if (u == to_string(candidate)) return candidate;
  return unit::unknown;
}

std::optional<algorithm> parse_algorithm(std::string_view text) {
  const std::string a = lower(text);
  constexpr std::array<algorithm, 4> all{algorithm::fixed_window, algorithm::sliding_window, algorithm::gcra,
                                         algorithm::token_bucket};
  for (algorithm candidate : all)
    if (a == to_string(candidate)) return candidate;
  return std::nullopt;
}

std::vector<std::string> split_on_star(std::string_view s) {
  std::vector<std::string> parts;
  for (;;) {
    const auto star = s.find('*');
    parts.emplace_back(s.substr(0, star));
    if (star == std::string_view::npos) return parts;
    s.remove_prefix(star + 1);
  }
}

class builder {
 public:
  builder(const std::string& file, std::vector<rate_limit_rule>& rules, std::vector<config_warning>& warnings)
      : file_(file), rules_(rules), warnings_(warnings) {}

  [[noreturn]] void fail(int line, const std::string& message) const { throw config_error(file_, line, message); }

  // envoyproxy/ratelimit's loadDescriptors, in its order of checks, plus admit's checks of the extensions.
  void add(configuration::node& parent, const std::vector<yaml::descriptor_doc>& docs, const std::string& prefix) {
    for (const yaml::descriptor_doc& d : docs) {
      if (d.key.empty())
        fail(d.key_line != 0 ? d.key_line : d.line, "descriptor has an empty key; every descriptor needs key: NAME");
      const std::string composite = d.value.empty() ? d.key : d.key + "_" + d.value;
      const std::string full_key = prefix + composite;
      if (const configuration::node* other = parent.child(composite)) {
        fail(d.line, "duplicate descriptor \"" + full_key + "\" (also at line " + std::to_string(other->line) +
                         "); a key and value may appear once in a list of descriptors");
      }
      configuration::node n;
      n.key = d.key;
      n.value = d.value;
      n.composite = composite;
      n.line = d.line;
      n.share_threshold = d.share_threshold;
      n.value_to_metric = d.value_to_metric;
      if (d.rate_limit) n.rule = add_rule(d, *d.rate_limit, full_key);
      if (d.share_threshold && composite.find('*') == std::string::npos) {
        fail(d.share_threshold_line, "share_threshold applies to wildcard values only (with '*'), and \"" + composite +
                                         "\" has none; use a value such as \"" + d.value +
                                         "*\" or remove share_threshold");
      }
      add(n, d.descriptors, full_key + ".");
      const std::size_t position = parent.children.size();
      if (composite.find('*') != std::string::npos) parent.wildcards.push_back({split_on_star(composite), position});
      parent.index.emplace(composite, position);
      parent.children.push_back(std::move(n));
    }
  }

 private:
  std::size_t add_rule(const yaml::descriptor_doc& d, const yaml::rate_limit_doc& r, const std::string& full_key) {
    rate_limit_rule rule;
    rule.full_key = full_key;
    rule.name = r.name;
    rule.shadow_mode = d.shadow_mode;
    rule.detailed_metric = d.detailed_metric;
    rule.file = file_;
    rule.line = r.line;
    rule.index = rules_.size();
    if (r.concurrency) {
      check_concurrency(r);
      rule.algorithm = algorithm::concurrency;
      rule.concurrency = *r.concurrency;
    } else {
      rule.unlimited = r.unlimited;
      const unit u = parse_unit(r.unit);
      if (r.unlimited) {
        if (u != unit::unknown)
          fail(r.unit_line, "unlimited: true takes no unit; remove unit \"" + r.unit + "\" or unlimited");
      } else if (u == unit::unknown) {
        if (r.unit_line == 0 || r.unit.empty())
          fail(r.unit_line != 0 ? r.unit_line : r.line,
               "rate_limit has no unit; " + std::string(units_in_words) + " (or unlimited: true)");
        fail(r.unit_line, "invalid rate limit unit \"" + r.unit + "\"; " + std::string(units_in_words));
      }
      rule.per = r.unlimited ? unit::unknown : u;
      rule.requests_per_unit = r.requests_per_unit;
      check_algorithm(r, rule);
    }
    for (const auto& [name, line] : r.replaces) {
      if (name.empty())
        fail(line, "replaces has an entry with an empty name; give the name of the rate_limit it replaces (- name: X)");
      if (name == r.name)
        fail(line, "rate_limit \"" + name + "\" replaces itself; replaces names the other rules it overrides");
      rule.replaces.push_back(name);
    }
    rules_.push_back(std::move(rule));
    return rules_.back().index;
  }

  // admit's `algorithm` and `burst`: algorithm one of four, burst >= 1 for the two that have one; neither on an
  // unlimited rule; a rate of 0 only for the fixed window (where envoyproxy/ratelimit takes it: always over limit).
  void check_algorithm(const yaml::rate_limit_doc& r, rate_limit_rule& rule) const {
    if (r.algorithm) {
      const auto a = parse_algorithm(*r.algorithm);
      if (!a)
        fail(r.algorithm_line, "invalid algorithm \"" + *r.algorithm +
                                   "\"; use fixed_window, sliding_window, gcra or token_bucket (for a concurrency "
                                   "limit, concurrency: N instead of unit and requests_per_unit)");
      if (r.unlimited) fail(r.algorithm_line, "an unlimited rate_limit counts nothing; remove algorithm or unlimited");
      rule.algorithm = *a;
    }
    if (r.burst) {
      if (r.unlimited) fail(r.burst_line, "an unlimited rate_limit counts nothing; remove burst or unlimited");
      if (rule.algorithm != algorithm::gcra && rule.algorithm != algorithm::token_bucket)
        fail(r.burst_line, "burst applies to algorithm gcra or token_bucket, not " +
                               std::string(to_string(rule.algorithm)) + "; set one of them or remove burst");
      if (*r.burst == 0) fail(r.burst_line, "burst must be at least 1");
      rule.burst = *r.burst;
    }
    check_over_limit_hits(r, rule);
    if (r.prefetch) check_prefetch(r, rule);
    if (rule.algorithm != algorithm::fixed_window && r.requests_per_unit == 0)
      fail(r.requests_per_unit_line != 0 ? r.requests_per_unit_line : r.line,
           "algorithm " + std::string(to_string(rule.algorithm)) +
               " needs requests_per_unit of at least 1 (only fixed_window takes 0: every request over the limit)");
    // As envoyproxy/ratelimit: a limit without requests_per_unit is a limit of 0. Given so, that is meant; left out,
    // it is likely a slip, which would answer OVER_LIMIT to every request of the rule: said once at load.
    if (!rule.unlimited && r.requests_per_unit_line == 0 && r.requests_per_unit == 0) {
      warnings_.push_back({file_, r.line,
                           "a rate_limit without requests_per_unit is a limit of 0: every request of " + rule.full_key +
                               " is over it (write requests_per_unit: 0 to mean that)"});
    }
  }

  // admit's `over_limit_hits`: count or drop; count is the fixed window's default and drop the others'; the sliding
  // window takes drop only (its estimate has no debt to carry), an unlimited rule neither.
  void check_over_limit_hits(const yaml::rate_limit_doc& r, rate_limit_rule& rule) const {
    if (!r.over_limit_hits) return;
    const int line = r.over_limit_hits_line;
    const std::string h = lower(*r.over_limit_hits);
    if (h != "count" && h != "drop")
      fail(line, "invalid over_limit_hits \"" + *r.over_limit_hits +
                     "\"; use count (a refused hit is charged all the same) or drop (it is not)");
    if (r.unlimited) fail(line, "an unlimited rate_limit counts nothing; remove over_limit_hits or unlimited");
    rule.over_limit = h == "count" ? over_limit_hits::count : over_limit_hits::drop;
    if (rule.algorithm == algorithm::sliding_window && rule.over_limit == over_limit_hits::count)
      fail(line,
           "over_limit_hits: count applies to fixed_window, token_bucket and gcra; the sliding window drops a "
           "refused hit (use token_bucket for a budget that goes into debt)");
  }

  // admit's `prefetch: N`: at least 1, and at most what the limiter can hold (the burst, or the window's limit).
  void check_prefetch(const yaml::rate_limit_doc& r, rate_limit_rule& rule) const {
    const int line = r.prefetch_line;
    if (r.unlimited) fail(line, "an unlimited rate_limit counts nothing; remove prefetch or unlimited");
    if (*r.prefetch == 0) fail(line, "prefetch must be at least 1 (1: every hit asks Redis)");
    const std::uint32_t most = rule.burst.value_or(rule.requests_per_unit);
    if (*r.prefetch > 1 && *r.prefetch > most)
      fail(line, "prefetch " + std::to_string(*r.prefetch) + " exceeds " + (rule.burst ? "the burst " : "the limit ") +
                     std::to_string(most) + ": a prefetch takes at most what the limiter holds");
    rule.prefetch = *r.prefetch;
  }

  // admit's `concurrency: N`: a rule of its own, holding at most N leases at once.
  void check_concurrency(const yaml::rate_limit_doc& r) const {
    const std::pair<int, std::string_view> others[] = {
        {r.unit_line, "unit"},        {r.requests_per_unit_line, "requests_per_unit"}, {r.algorithm_line, "algorithm"},
        {r.burst_line, "burst"},      {r.over_limit_hits_line, "over_limit_hits"},     {r.unlimited_line, "unlimited"},
        {r.prefetch_line, "prefetch"}};
    for (const auto& [line, key] : others)
      if (line != 0)
        fail(line, "concurrency: N is a limit of its own and takes no " + std::string(key) + "; remove " +
                       std::string(key) + " or concurrency");
    if (*r.concurrency == 0) fail(r.concurrency_line, "concurrency must be at least 1");
  }

  const std::string& file_;
  std::vector<rate_limit_rule>& rules_;
  std::vector<config_warning>& warnings_;
};

}  // namespace

void load_yaml_file(const std::string& file, const std::string& text, std::vector<configuration::domain_tree>& domains,
                    std::vector<rate_limit_rule>& rules, std::vector<config_warning>& warnings) {
  const yaml::file_doc doc = yaml::read_file(file, text);
  for (const auto& [line, message] : doc.ignored) warnings.push_back({file, line, message});
  if (doc.domain.empty()) {
    throw config_error(file, doc.domain_line != 0 ? doc.domain_line : doc.first_line,
                       "the file has no domain; add domain: NAME (one domain per file)");
  }
  for (const configuration::domain_tree& d : domains) {
    if (d.name == doc.domain)
      throw config_error(file, doc.domain_line,
                         "duplicate domain \"" + doc.domain + "\": " + d.file + " (line " + std::to_string(d.line) +
                             ") has it already; a domain is defined by one file");
  }
  configuration::domain_tree tree;
  tree.name = doc.domain;
  tree.file = file;
  tree.line = doc.domain_line;
  builder(file, rules, warnings).add(tree.root, doc.descriptors, doc.domain + ".");
  domains.push_back(std::move(tree));
}

}  // namespace admit::serve::detail
