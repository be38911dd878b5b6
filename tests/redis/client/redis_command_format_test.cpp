// admit::redis's request encoding (detail::append_command, format_command, pipeline::add) against hiredis's
// redisFormatCommandArgv, the encoder it replaces: the same bytes for every command, binary arguments included.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "admit/redis/client/command.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/pipeline.hpp"

namespace {

using admit::redis::command;
using admit::redis::detail::append_command;
using admit::redis::detail::format_command;

std::string hiredis_format(const command& cmd) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& a : cmd.args()) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* out = nullptr;
  const int n = redisFormatCommandArgv(&out, static_cast<int>(argv.size()), argv.data(), lengths.data());
  EXPECT_GT(n, 0);
  std::string formatted(out, static_cast<std::size_t>(n));
  redisFreeCommand(out);
  return formatted;
}

TEST(RedisCommandFormat, IsRespArrayOfBulkStrings) {
  EXPECT_EQ(format_command(command{"PING"}), "*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(format_command(command{"SET", "k", ""}.arg("PX").arg(1500)),
            "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\nPX\r\n$4\r\n1500\r\n");
}

TEST(RedisCommandFormat, MatchesHiredisForRandomBinaryCommands) {
  std::mt19937 random(20261204);  // fixed: a failure repeats
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> count(1, 40);
  std::uniform_int_distribution<std::size_t> length(0, 300);
  for (int round = 0; round < 500; ++round) {
    command cmd;
    const std::size_t n = count(random);
    for (std::size_t i = 0; i < n; ++i) {
      std::string a(i == 0 ? 1 + length(random) % 12 : length(random), '\0');  // NULs, CR and LF included
      for (char& c : a) c = static_cast<char>(byte(random));
      cmd.arg(a);
    }
    ASSERT_EQ(format_command(cmd), hiredis_format(cmd)) << "round " << round;
  }
}

TEST(RedisCommandFormat, AppendsAfterWhatIsThere) {
  std::string payload = "*1\r\n$4\r\nPING\r\n";
  append_command(payload, command{"INCRBY", "counter", "5"});
  append_command(payload, command{"EXPIRE", "counter", "60", "NX"});
  EXPECT_EQ(payload, "*1\r\n$4\r\nPING\r\n" + hiredis_format(command{"INCRBY", "counter", "5"}) +
                         hiredis_format(command{"EXPIRE", "counter", "60", "NX"}));
}

TEST(RedisCommandFormat, PipelineArgumentsAreThoseOfACommand) {
  const std::string key("k\0\r\n", 4);
  admit::redis::pipeline p;
  p.add("INCRBY", key, 5).add("SET", std::string_view("v"), -42, std::uint64_t{18446744073709551615u}, "NX");
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.payload(), hiredis_format(command{"INCRBY", key, "5"}) +
                             hiredis_format(command{"SET", "v", "-42", "18446744073709551615", "NX"}));
}

TEST(RedisCommandFormat, APipelineBuiltInOneExpression) {
  const admit::redis::pipeline p = admit::redis::pipeline{}.add(command{"PING"}).add("ECHO", "x");
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.payload(), hiredis_format(command{"PING"}) + hiredis_format(command{"ECHO", "x"}));
}

TEST(RedisCommandFormat, RefusesAnEmptyCommand) {
  std::string payload = "kept";
  EXPECT_THROW(append_command(payload, command{}), std::invalid_argument);
  EXPECT_EQ(payload, "kept");
  EXPECT_THROW(format_command(command{}), std::invalid_argument);
}

}  // namespace
