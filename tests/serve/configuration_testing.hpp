// tests/serve/configuration_testing.hpp — what the tests of loading `admit serve`'s configuration share
// (serve_configuration_test.cpp, serve_configuration_refusals_test.cpp): a list of (file name, text) and the loading
// of one such file.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/config/configuration.hpp"

namespace admit::serve::testing {

// The files configuration::load reads: (name, text), in load order.
using file_list = std::vector<std::pair<std::string, std::string>>;

// The configuration of one file `name` holding `text`; throws config_error as configuration::load does.
inline std::shared_ptr<const configuration> load_one(const std::string& text, const std::string& name = "one.yaml") {
  const file_list files{{name, text}};
  return configuration::load(files);
}

}  // namespace admit::serve::testing
