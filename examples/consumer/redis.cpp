// Uses the installed admit::redis: builds a connection and a distributed GCRA (nothing is sent until a decision is
// asked for) and prints the interval the limiter enforces.
#include <admit/redis/client/connection.hpp>
#include <admit/redis/gcra.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>

int main() {
  boost::asio::io_context io;
  admit::redis::connection conn(io.get_executor(), "redis://127.0.0.1:6379/0");
  admit::redis::gcra limiter(conn, "api", admit::rate::parse("100/s"), 20);
  const auto interval = limiter.emission_interval().count();
  std::printf("admit::redis::gcra \"%s\": one request every %lld us, bursts of %lld\n", limiter.name().c_str(),
              static_cast<long long>(interval), static_cast<long long>(limiter.burst()));
  return interval == 10'000 ? 0 : 1;
}
