// The smallest program that uses admit: a token bucket of 5 requests/s with a burst of 3, fed 10 requests at once,
// then the same on the manual clock to show what the bucket does as time passes. Prints what it decided.
#include <admit/testing/manual_clock.hpp>
#include <admit/token_bucket.hpp>
#include <chrono>
#include <cstdio>

int main() {
  admit::token_bucket bucket{admit::rate::parse("5/s"), 3};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += bucket.try_acquire() ? 1 : 0;
  std::printf("real clock: %d of 10 admitted at once (burst 3)\n", admitted);

  using clock = admit::testing::manual_clock;
  admit::basic_token_bucket<clock> simulated{admit::rate::parse("5/s"), 3};
  admitted = 0;
  for (int i = 0; i < 10; ++i) {
    admitted += simulated.try_acquire() ? 1 : 0;
    clock::advance(std::chrono::milliseconds(100));
  }
  std::printf("manual clock: %d of 10 admitted at one per 100 ms\n", admitted);
  // 3 from the burst + 4 refilled by 0.9 s (one every 200 ms): 7.
  return admitted == 7 ? 0 : 1;
}
