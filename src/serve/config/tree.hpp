// serve/config/tree.hpp — the descriptor tree of a loaded configuration (configuration::node, ::domain_tree), shared by
// the YAML loader (yaml_loader.cpp builds it) and configuration.cpp (matches against it). Not part of the interface.
//
// The tree keeps envoyproxy/ratelimit's own indexing so that matching is the same, quirks included: a descriptor is
// known at its level by its "composite" — `key` alone, or `key_value` when the YAML gives a value — and a request's
// entry is looked up by `key_value` first, then among the level's wildcard composites (those containing `*`) in file
// order, then by `key` alone.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/config/configuration.hpp"

namespace admit::serve {

struct configuration::node {
  std::string key;        // the YAML `key` (empty only for a domain's root)
  std::string value;      // the YAML `value`, empty when not given; may hold `*` wildcards
  std::string composite;  // `key` or `key_value`: the node's name at its level
  int line = 0;           // 1-based line of the descriptor in its file (0 for a domain's root)
  bool share_threshold = false;
  bool value_to_metric = false;
  std::optional<std::size_t> rule;  // index into configuration::rules(); none: the descriptor is not limited itself

  // A wildcard composite of this level: its text split on `*` (so "k_a*b" is {"k_a", "b"}) and the child it names.
  struct wildcard {
    std::vector<std::string> parts;
    std::size_t child = 0;
  };
  std::vector<node> children;                             // in file order
  std::map<std::string, std::size_t, std::less<>> index;  // composite -> position in children
  std::vector<wildcard> wildcards;                        // in file order, as envoyproxy/ratelimit tries them

  [[nodiscard]] const node* child(std::string_view composite_name) const {
    auto it = index.find(composite_name);
    return it == index.end() ? nullptr : &children[it->second];
  }
};

struct configuration::domain_tree {
  std::string name;
  std::string file;  // the file that defined the domain
  int line = 0;      // line of its `domain:` key
  node root;         // children: the top-level descriptors
};

// Whether `text` matches a composite split on `*` (each `*` matches any run of characters, possibly empty), as
// envoyproxy/ratelimit's wildcard matching does.
[[nodiscard]] bool wildcard_match(const std::vector<std::string>& parts, std::string_view text) noexcept;

}  // namespace admit::serve
