// The five limiters' code (and the semaphore's) as one Redis Functions library, against real redis-servers: on Redis 7
// their calls are FCALLs, the library loaded once, by the first call of any of them; a server without functions (FCALL
// and FUNCTION renamed away, as on Redis 6) and an ACL user who may not call them get the same code by EVALSHA, with
// the same decisions, FCALL asked once for all of them.
// The fallback cases run in a child process (this binary again): a process remembers that functions were refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "child_process.hpp"
#include "io_thread.hpp"
#include "limiter_kinds.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "self_exec.hpp"

namespace limiter_functions_testing {

using namespace admit::redis::testing;
using admit::redis::connection;

// Each of the five limiters, with a limit of 3 that does not refill: 3 admitted, the fourth refused, a query of 0
// answered with nothing left. Fails the test otherwise.
template <class Kind>
void decide_three(connection& conn, const std::string& name) {
  const auto limiter = Kind::make(conn, name, 3, patient());
  for (int i = 0; i < 3; ++i) {
    const auto r = limiter.decide("k");
    ASSERT_TRUE(r.consulted) << name << ": " << r.error.message() << " " << r.message;
    EXPECT_TRUE(r.decision.admitted) << name << " " << i;
    EXPECT_EQ(r.decision.remaining, 2 - i) << name;
  }
  EXPECT_FALSE(limiter.decide("k").decision.admitted) << name;
  EXPECT_EQ(limiter.decide("k", 0).decision.remaining, 0) << name;
}
void decide_with_each(connection& conn) {
  decide_three<gcra_kind>(conn, "gcra");
  decide_three<token_bucket_kind>(conn, "token_bucket");
  decide_three<fixed_window_kind>(conn, "fixed_window");
  decide_three<sliding_window_kind>(conn, "sliding_window");
  decide_three<sliding_log_kind>(conn, "sliding_log");
}

// The role "decide URL": decide_with_each() against that server, exit 0 when every expectation held.
[[noreturn]] void decide_role(const std::vector<std::string>& args) {
  {
    io_thread io;
    connection conn(io.executor(), args.at(1));
    decide_with_each(conn);
  }
  std::_Exit(::testing::Test::HasFailure() ? 3 : 0);
}
ADMIT_CHILD_ROLE_TEST(RedisLimiterFunctionsChild, decide_role)

TEST(RedisLimiterFunctions, CallsAreFcallsOfOneLibraryLoadedOnce) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  decide_with_each(conn);
  EXPECT_EQ(server.calls("evalsha"), 0);
  EXPECT_GE(server.calls("fcall"), 25);
  EXPECT_EQ(server.calls("function|load"), 1) << "one library, loaded by the first call";
  // FUNCTION LIST: one library "admit_<version>", its functions each "admit_<script>_<the same version>".
  const std::string libraries = server.admin({"FUNCTION", "LIST"});
  const auto at = libraries.find("library_name\nadmit_");
  ASSERT_NE(at, std::string::npos) << libraries;
  const std::string version = libraries.substr(at + 19, 16);
  EXPECT_EQ(libraries.find("library_name", at + 1), std::string::npos) << "more than one library: " << libraries;
  for (const char* name : {"admit_gcra_", "admit_token_bucket_", "admit_fixed_window_", "admit_sliding_window_",
                           "admit_sliding_log_", "admit_semaphore_"}) {
    EXPECT_NE(libraries.find(name + version), std::string::npos) << name << version << " is not loaded: " << libraries;
  }
}

// What a server older than 7.0 answers ("unknown command"): the same decisions by EVALSHA, FCALL asked once.
TEST(RedisLimiterFunctions, AServerWithoutFunctionsGetsTheSameCodeByEvalsha) {
  redis_server::config old;
  old.extra_arguments = {"--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""};
  redis_server server(old);
  child_process child(role_argv("RedisLimiterFunctionsChild.Role", {"decide", server.url()}));
  ASSERT_EQ(child.wait(), 0) << child.out() << child.err();
  EXPECT_GE(server.calls("evalsha"), 25);
  const std::string errors = server.admin({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_ERR:count=1\r"), std::string::npos) << "FCALL asked more than once: " << errors;
}

// A user who may run scripts but not functions: NOPERM for FCALL, EVALSHA instead.
TEST(RedisLimiterFunctions, AUserWhoMayNotCallFunctionsGetsEvalsha) {
  redis_server server;
  server.admin({"ACL", "SETUSER", "scripts", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function"});
  child_process child(role_argv("RedisLimiterFunctionsChild.Role",
                                {"decide", "redis://scripts:pw@127.0.0.1:" + std::to_string(server.port())}));
  ASSERT_EQ(child.wait(), 0) << child.out() << child.err();
  EXPECT_GE(server.calls("evalsha"), 25);
  // A refused FCALL counts in rejected_calls, not calls: the refusal is counted as an error, once for the library.
  const std::string errors = server.admin({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_NOPERM:count=1\r"), std::string::npos) << "FCALL asked more than once: " << errors;
}

}  // namespace limiter_functions_testing
