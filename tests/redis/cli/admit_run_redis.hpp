// tests/redis/cli/admit_run_redis.hpp — the fixture of `admit run --redis`'s end-to-end tests (redis_cli_run_test.cpp,
// redis_cli_run_release_test.cpp): a redis-server of the test's own, the built admit, a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "admit_run_testing.hpp"
#include "child_process.hpp"
#include "redis_server.hpp"

#ifdef ADMIT_CLI

namespace admit::redis::testing::run {

class AdmitRunRedis : public ::testing::Test {
 protected:
  // `admit run --redis <server> --name NAME <more...>`
  args run(const std::string& name, const args& more) const {
    return args{ADMIT_CLI, "run", "--redis", server_.url(), "--name", name} + more;
  }
  static admit::redis::testing::run_result admit(const args& a,
                                                 std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    return run_to_end(a, limit);
  }
  // The server as admit run's messages name it (its URL without the database).
  std::string where() const { return "redis://127.0.0.1:" + std::to_string(server_.port()); }
  // A holder of the only permit of `name` (its command sleeps until the test ends), started.
  std::unique_ptr<admit::redis::testing::child_process> hold(const std::string& name, const args& more = {}) {
    auto c = std::make_unique<admit::redis::testing::child_process>(
        run(name, args{"--concurrency", "1", "--json"} + more + args{"--", "sleep", "60"}));
    EXPECT_TRUE(wait_for_event(*c, {"started"})) << c->err();
    return c;
  }
  // `sh -c SCRIPT sh <dir>/ran`: the command records that it ran in that file.
  args records_ran(const std::string& script = "echo ran >> \"$1\"") const { return {"sh", "-c", script, "sh", ran_}; }
  bool ran() const { return std::filesystem::exists(ran_); }

  admit::redis::testing::redis_server server_;
  temp_dir dir_;
  std::string ran_ = dir_ / "ran";
};

}  // namespace admit::redis::testing::run

#endif  // ADMIT_CLI
