// serve/config/yaml_loader.hpp — one YAML file of `admit serve`'s configuration into the descriptor tree (tree.hpp),
// with envoyproxy/ratelimit's validation and admit's checks of its extensions. Internal: configuration::load calls it
// per file.
#pragma once

#include <string>
#include <vector>

#include "serve/config/tree.hpp"

namespace admit::serve::detail {

// Parses `text` (the contents of `file`), checks it, and appends its domain to `domains` and its rules to `rules`
// (indexes continue from rules.size()), and what it holds that means nothing to `warnings`. `domains` holds the files
// loaded before, for the duplicate-domain check.
// Throws config_error naming `file`, the line, and the problem; on a throw, `domains` and `rules` may hold a part of
// the file (the caller discards them).
void load_yaml_file(const std::string& file, const std::string& text, std::vector<configuration::domain_tree>& domains,
                    std::vector<rate_limit_rule>& rules, std::vector<config_warning>& warnings);

}  // namespace admit::serve::detail
