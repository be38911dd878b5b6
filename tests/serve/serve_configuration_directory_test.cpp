// Loading `admit serve`'s configuration from a directory (configuration::load_directory): which files are read and
// in what order, an empty directory, what cannot be read (named with the system's reason), and the bundled example.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "serve/config/configuration.hpp"

namespace {

using admit::serve::algorithm;
using admit::serve::config_error;
using admit::serve::configuration;
using admit::serve::unit;

class ConfigurationDirectory : public testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("admit serve config test " + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigurationDirectory, LoadsEveryYamlFileDirectlyInItInNameOrder) {
  write("b.yaml", "domain: second\ndescriptors:\n  - {key: b, rate_limit: {unit: second, requests_per_unit: 1}}\n");
  write("a.yaml", "domain: first\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n");
  write("README.md", "not yaml: [\n");
  write("c.yml", "domain: third\ndescriptors:\n  - {key: c, rate_limit: {unit: second, requests_per_unit: 1}}\n");
  write("d.yml~", "not read: [\n");
  write("a.yaml~", "not read: [\n");
  std::filesystem::create_directories(dir_ / "nested");
  write("nested/d.yaml", "not read: [\n");
  std::filesystem::create_directories(dir_ / "dir.yaml");
  const auto c = configuration::load_directory(dir_);
  ASSERT_EQ(c->rules().size(), 3U);
  EXPECT_EQ(c->rules()[0].full_key, "first.a");
  EXPECT_EQ(c->rules()[0].file, (dir_ / "a.yaml").string());
  EXPECT_EQ(c->rules()[1].full_key, "second.b");
  EXPECT_EQ(c->rules()[2].full_key, "third.c");  // a .yml too: envoyproxy/ratelimit's loader reads it
  EXPECT_TRUE(c->has_domain("first"));
  EXPECT_TRUE(c->has_domain("second"));
  EXPECT_TRUE(c->has_domain("third"));
  // What is not read is named, in name order (envoyproxy/ratelimit's loader reads every file of the tree: ignored in
  // silence, a file of rules would leave its requests answered OK); hidden names are not.
  std::vector<std::string> not_read;
  for (const auto& w : c->warnings()) {
    EXPECT_EQ(w.line, 0) << w.file;
    EXPECT_NE(w.message.find("not read"), std::string::npos) << w.message;
    not_read.push_back(std::filesystem::path(w.file).filename().string());
  }
  EXPECT_EQ(not_read, (std::vector<std::string>{"README.md", "a.yaml~", "d.yml~", "dir.yaml", "nested"}));
}

TEST_F(ConfigurationDirectory, HiddenNamesAreSkippedWithoutAWord) {
  write("a.yaml", "domain: first\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n");
  write(".a.yaml.swp", "not read: [\n");
  write(".hidden.yaml", "not read: [\n");
  std::filesystem::create_symlink(dir_ / "gone", dir_ / ".#a.yaml");  // an editor's lock link, dangling
  std::filesystem::create_directories(dir_ / "..2026_12_07");
  const auto c = configuration::load_directory(dir_);
  EXPECT_EQ(c->rules().size(), 1U);
  EXPECT_TRUE(c->warnings().empty()) << c->warnings().front().file;
}

TEST_F(ConfigurationDirectory, ADuplicateDomainNamesTheLaterFile) {
  write("10-a.yaml", "domain: same\n");
  write("20-b.yaml", "domain: same\n");
  try {
    (void)configuration::load_directory(dir_);
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), (dir_ / "20-b.yaml").string());
    EXPECT_EQ(e.line(), 1);
    EXPECT_NE(e.message().find((dir_ / "10-a.yaml").string()), std::string::npos) << e.message();
  }
}

TEST_F(ConfigurationDirectory, AnEmptyDirectoryIsAnEmptyConfiguration) {
  const auto c = configuration::load_directory(dir_);
  EXPECT_TRUE(c->rules().empty());
  EXPECT_FALSE(c->has_domain(""));
  EXPECT_EQ(nlohmann::json::parse(c->to_json()).at("domains").size(), 0U);
}

TEST_F(ConfigurationDirectory, AMissingDirectoryNamesThePathAndTheSystemsReason) {
  const auto missing = dir_ / "no such dir";
  try {
    (void)configuration::load_directory(missing);
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), missing.string());
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.message().find("No such file or directory"), std::string::npos) << e.message();
  }
}

TEST_F(ConfigurationDirectory, AnUnreadableFileNamesThePathAndTheSystemsReason) {
  // A link to nowhere cannot be opened whoever runs the test (a mode of 000 would not stop root).
  std::filesystem::create_symlink(dir_ / "gone", dir_ / "dangling.yaml");
  try {
    (void)configuration::load_directory(dir_);
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), (dir_ / "dangling.yaml").string());
    EXPECT_NE(e.message().find("No such file or directory"), std::string::npos) << e.message();
  }
}

TEST_F(ConfigurationDirectory, ARefusedFileIsNamedWithItsPathAndLine) {
  write("good.yaml", "domain: good\n");
  write("bad.yaml", "domain: bad\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n");
  try {
    (void)configuration::load_directory(dir_);
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir_ / "bad.yaml").string() +
                  R"(:5: invalid rate limit unit "fortnight"; use second, minute, hour, day, week, month or year)");
  }
}

TEST_F(ConfigurationDirectory, AFileThatIsNotTextIsRefusedAsSuchWithTheByteAndItsOffset) {
  // A gzip'd file under a .yaml name, a NUL, a cut UTF-8 sequence, a surrogate: refused before YAML reads them.
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x1f\x8b\x08\x00", 4), "byte 0x8b at offset 1"},
      {std::string("domain: a\0b\n", 12), "byte 0x00 at offset 9"},
      {"domain: caf\xc3", "byte 0xc3 at offset 11"},
      {"domain: \xed\xa0\x80\n", "byte 0xed at offset 8"},
  };
  for (const auto& [content, says] : cases) {
    write("bad.yaml", content);
    try {
      (void)configuration::load_directory(dir_);
      ADD_FAILURE() << says;
    } catch (const config_error& e) {
      EXPECT_EQ(e.file(), (dir_ / "bad.yaml").string());
      EXPECT_NE(e.message().find("not a text file"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(says), std::string::npos) << e.message();
    }
  }
  write("bad.yaml", "domain: caf\xc3\xa9\n# \xf0\x9f\x98\x80 is text\n");  // UTF-8 text loads
  EXPECT_NO_THROW((void)configuration::load_directory(dir_));
}

#ifdef ADMIT_SERVE_EXAMPLE_CONFIG
// The bundled example (examples/serve/config/) loads, and says the truth in its comments.
TEST(ConfigurationExample, TheBundledExampleLoadsAndMatchesAsItsCommentsSay) {
  const auto c = configuration::load_directory(ADMIT_SERVE_EXAMPLE_CONFIG);
  auto find = [&c](const std::string& domain, std::vector<admit::serve::descriptor_entry> entries) {
    return c->find(domain, entries);
  };
  EXPECT_EQ(find("database_qps", {{"database", "orders"}})->rule->requests_per_unit, 300U);
  EXPECT_FALSE(find("database_qps", {{"database", "users"}}));
  EXPECT_EQ(find("notifications", {{"kind", "promotion"}, {"phone", "555"}})->rule->requests_per_unit, 3U);
  EXPECT_EQ(find("notifications", {{"phone", "555"}})->rule->requests_per_unit, 50U);
  EXPECT_FALSE(find("notifications", {{"kind", "promotion"}}));
  EXPECT_EQ(find("edge", {{"client_ip", "198.51.100.4"}})->rule->requests_per_unit, 20U);
  EXPECT_EQ(find("edge", {{"client_ip", "203.0.113.9"}})->rule->requests_per_unit, 0U);
  EXPECT_FALSE(find("edge", {{"client_ip", "192.0.2.1"}}));
  EXPECT_EQ(find("edge", {{"route", "/login"}, {"client_ip", "198.51.100.4"}})->rule->per, unit::minute);
  EXPECT_FALSE(find("edge", {{"route", "/login"}}));
  EXPECT_EQ(find("edge", {{"path", "/static/a.css"}})->counter_key,
            find("edge", {{"path", "/static/b.js"}})->counter_key);
  EXPECT_TRUE(find("accounts", {{"caller", "health-checker"}})->rule->unlimited);
  EXPECT_TRUE(find("accounts", {{"service", "billing"}, {"plan", "trial"}})->rule->shadow_mode);
  const auto paid = find("accounts", {{"service", "billing"}, {"plan", "paid"}});
  EXPECT_EQ(paid->rule->algorithm, algorithm::gcra);
  EXPECT_EQ(paid->rule->burst, 20U);
  const auto acme = find("accounts", {{"customer", "acme"}});
  EXPECT_EQ(acme->rule->replaces, std::vector<std::string>{paid->rule->name});
  EXPECT_EQ(acme->rule->algorithm, algorithm::sliding_window);
  EXPECT_EQ(find("accounts", {{"export", "report-7"}})->rule->concurrency, 4U);
}
#endif

}  // namespace
