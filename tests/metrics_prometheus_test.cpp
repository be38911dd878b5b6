// admit::metrics::registry (include/admit/metrics/prometheus.hpp): the exact exposition text of a small registry
// (families, escaping, histogram buckets from a wait_histogram and without one), a concurrency limiter and a
// semaphore registered by reference, name validation, duplicates and removal, and a scrape while limiters run.
#include "admit/metrics/prometheus.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "admit/concurrency_limiter.hpp"
#include "admit/semaphore.hpp"
#include "admit/testing/invalid_argument_message.hpp"
#include "admit/token_bucket.hpp"

namespace {

using namespace std::chrono_literals;
using admit::limiter_snapshot;
using admit::wait_histogram;
using admit::metrics::registry;
using ::testing::HasSubstr;

TEST(PrometheusRegistry, WritesTheExactTextOfASmallRegistry) {
  wait_histogram waits;
  for (auto d : {0ns, 0ns, 0ns, 1000ns, std::chrono::nanoseconds(3ms), std::chrono::nanoseconds(20s)}) waits.record(d);
  limiter_snapshot api;
  api.limit = 4;
  api.in_flight = 1;
  api.waiting = 2;
  api.admitted = 6;
  api.waited = 3;
  api.unavailable = 1;
  api.rejected = 2;
  api.timed_out = 3;
  limiter_snapshot db;
  db.admitted = 2;
  db.wait.mean = 1500us;
  db.failed = 7;

  registry reg;
  reg.add(
      "api", {{"route", "/v1"}}, [&] { return api; }, [&] { return &waits; });
  reg.add("db", {{"note", "a \"quoted\" \\ path\nline"}}, [&] { return db; });
  // 1000 ns shares its histogram bucket [992, 1007] ns with waits above 1 µs: it counts from le="2.5e-06" up.
  const std::string want = R"(# HELP admit_admitted_total Acquisitions admitted, at once or after a wait.
# TYPE admit_admitted_total counter
admit_admitted_total{limiter="api",route="/v1"} 6
admit_admitted_total{limiter="db",note="a \"quoted\" \\ path\nline"} 2
# HELP admit_waited_total Admitted acquisitions that had to wait.
# TYPE admit_waited_total counter
admit_waited_total{limiter="api",route="/v1"} 3
admit_waited_total{limiter="db",note="a \"quoted\" \\ path\nline"} 0
# HELP admit_rejected_total Acquisitions refused, by reason.
# TYPE admit_rejected_total counter
admit_rejected_total{limiter="api",route="/v1",reason="unavailable"} 1
admit_rejected_total{limiter="api",route="/v1",reason="queue_full"} 2
admit_rejected_total{limiter="api",route="/v1",reason="timeout"} 3
admit_rejected_total{limiter="api",route="/v1",reason="cancelled"} 0
admit_rejected_total{limiter="api",route="/v1",reason="closed"} 0
admit_rejected_total{limiter="api",route="/v1",reason="exceeds_capacity"} 0
admit_rejected_total{limiter="api",route="/v1",reason="failed"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="unavailable"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="queue_full"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="timeout"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="cancelled"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="closed"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="exceeds_capacity"} 0
admit_rejected_total{limiter="db",note="a \"quoted\" \\ path\nline",reason="failed"} 7
# HELP admit_limit The concurrency limit now (0 for a limiter without one).
# TYPE admit_limit gauge
admit_limit{limiter="api",route="/v1"} 4
admit_limit{limiter="db",note="a \"quoted\" \\ path\nline"} 0
# HELP admit_in_flight Permits held now.
# TYPE admit_in_flight gauge
admit_in_flight{limiter="api",route="/v1"} 1
admit_in_flight{limiter="db",note="a \"quoted\" \\ path\nline"} 0
# HELP admit_waiting Requests waiting now.
# TYPE admit_waiting gauge
admit_waiting{limiter="api",route="/v1"} 2
admit_waiting{limiter="db",note="a \"quoted\" \\ path\nline"} 0
# HELP admit_wait_seconds How long admitted acquisitions waited (0 for immediate ones).
# TYPE admit_wait_seconds histogram
admit_wait_seconds_bucket{limiter="api",route="/v1",le="1e-06"} 3
admit_wait_seconds_bucket{limiter="api",route="/v1",le="2.5e-06"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="5e-06"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="1e-05"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="2.5e-05"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="5e-05"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.0001"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.00025"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.0005"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.001"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.0025"} 4
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.005"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.01"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.025"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.05"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.1"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.25"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="0.5"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="1"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="2.5"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="5"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="10"} 5
admit_wait_seconds_bucket{limiter="api",route="/v1",le="+Inf"} 6
admit_wait_seconds_sum{limiter="api",route="/v1"} 20.003001
admit_wait_seconds_count{limiter="api",route="/v1"} 6
admit_wait_seconds_bucket{limiter="db",note="a \"quoted\" \\ path\nline",le="+Inf"} 2
admit_wait_seconds_sum{limiter="db",note="a \"quoted\" \\ path\nline"} 0.003
admit_wait_seconds_count{limiter="db",note="a \"quoted\" \\ path\nline"} 2
)";
  EXPECT_EQ(reg.text(), want);
  std::ostringstream out;
  reg.write(out);
  EXPECT_EQ(out.str(), want);
}

// A distributed semaphore's lost leases are a family of their own, with a series for each limiter that has leases;
// without any such limiter the family is not written at all.
TEST(PrometheusRegistry, WritesLostLeasesOnlyForLimitersWithLeases) {
  limiter_snapshot leased;
  leased.leases_lost = 3;
  limiter_snapshot plain;
  registry reg;
  reg.add("plain", {}, [&] { return plain; });
  EXPECT_THAT(reg.text(), ::testing::Not(HasSubstr("admit_leases_lost_total")));
  reg.add("db", {{"fleet", "batch"}}, [&] { return leased; });
  const std::string text = reg.text();
  EXPECT_THAT(text, HasSubstr("# TYPE admit_leases_lost_total counter\n"
                              "admit_leases_lost_total{limiter=\"db\",fleet=\"batch\"} 3\n"
                              "# HELP admit_wait_seconds"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("admit_leases_lost_total{limiter=\"plain\"")));
}

TEST(PrometheusRegistry, TheBucketBoundsMatchTheirLeTexts) {
  constexpr auto b = registry::bucket_bounds();
  EXPECT_EQ(b.front(), 1us);
  EXPECT_EQ(b[1], 2500ns);
  EXPECT_EQ(b[2], 5us);
  EXPECT_EQ(b[9], 1ms);
  EXPECT_EQ(b[18], 1s);
  EXPECT_EQ(b.back(), 10s);
  for (std::size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(PrometheusRegistry, ReadsAConcurrencyLimiterAndASemaphoreByReference) {
  admit::concurrency_limiter limiter{{.limit = 2, .max_waiters = 0, .timeout = 1s}};
  admit::semaphore sem{3};
  sem.enable_metrics();
  registry reg;
  reg.add("pool", {}, limiter);
  reg.add("sem", {{"kind", "global"}}, sem);
  auto a = limiter.acquire();
  auto b = limiter.acquire();
  EXPECT_FALSE(limiter.acquire());  // queue_full (max_waiters 0)
  EXPECT_FALSE(limiter.try_acquire());
  auto c = sem.try_acquire(3);
  EXPECT_FALSE(sem.try_acquire());
  const std::string text = reg.text();
  EXPECT_THAT(text, HasSubstr("admit_admitted_total{limiter=\"pool\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_rejected_total{limiter=\"pool\",reason=\"queue_full\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("admit_rejected_total{limiter=\"pool\",reason=\"unavailable\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("admit_in_flight{limiter=\"pool\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_limit{limiter=\"pool\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_wait_seconds_bucket{limiter=\"pool\",le=\"1e-06\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_admitted_total{limiter=\"sem\",kind=\"global\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("admit_rejected_total{limiter=\"sem\",kind=\"global\",reason=\"unavailable\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("admit_in_flight{limiter=\"sem\",kind=\"global\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("admit_wait_seconds_count{limiter=\"sem\",kind=\"global\"} 1\n"));
}

// A rate limiter with metrics has its waits' histogram: the registry writes its real buckets, not only +Inf.
TEST(PrometheusRegistry, WritesARateLimitersWaitBuckets) {
  admit::token_bucket bucket{admit::rate::per_second(1), 2};
  bucket.enable_metrics();
  registry reg;
  reg.add("api", {}, bucket);
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_FALSE(bucket.try_acquire());
  const std::string text = reg.text();
  EXPECT_THAT(text, HasSubstr("admit_admitted_total{limiter=\"api\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_wait_seconds_bucket{limiter=\"api\",le=\"1e-06\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("admit_wait_seconds_bucket{limiter=\"api\",le=\"+Inf\"} 2\n"));
}

TEST(PrometheusRegistry, RejectsBadNamesNamingThemAndThePattern) {
  registry reg;
  admit::semaphore sem{1};
  const auto message = [&](auto&& f) { return admit::testing::invalid_argument_message(f); };
  EXPECT_THAT(message([&] { reg.add("9lives", {}, sem); }),
              HasSubstr("limiter name \"9lives\" must match [a-zA-Z_][a-zA-Z0-9_]* and not begin with \"__\""));
  EXPECT_THAT(message([&] { reg.add("", {}, sem); }), HasSubstr("limiter name \"\" must match"));
  EXPECT_THAT(message([&] { reg.add("api-v1", {}, sem); }), HasSubstr("\"api-v1\" must match"));
  EXPECT_THAT(message([&] { reg.add("api", {{"__x", "1"}}, sem); }), HasSubstr("label name \"__x\" must match"));
  EXPECT_THAT(message([&] { reg.add("api", {{"a.b", "1"}}, sem); }), HasSubstr("label name \"a.b\" must match"));
  EXPECT_THAT(message([&] { reg.add("api", {{"le", "1"}}, sem); }), HasSubstr("\"le\" is the registry's own"));
  EXPECT_THAT(message([&] {
                reg.add("api", {{"limiter", "x"}}, sem);
              }),
              HasSubstr("\"limiter\" is the registry's own"));
  EXPECT_THAT(message([&] {
                reg.add("api", {{"a", "1"}, {"a", "2"}}, sem);
              }),
              HasSubstr("\"a\" of \"api\" is given twice"));
  EXPECT_EQ(reg.size(), 0u);
  EXPECT_EQ(reg.text(), "");
}

TEST(PrometheusRegistry, RefusesTheSameNameAndLabelsTwiceAndRemoves) {
  registry reg;
  admit::semaphore a{1}, b{1};
  reg.add("api", {{"route", "/v1"}, {"zone", "eu"}}, a);
  reg.add("api", {{"route", "/v2"}, {"zone", "eu"}}, b);  // other labels: another series
  reg.add("other", {{"route", "/v1"}, {"zone", "eu"}}, b);
  EXPECT_THAT(admit::testing::invalid_argument_message([&] {
                reg.add("api", {{"zone", "eu"}, {"route", "/v1"}}, b);
              }),
              HasSubstr("\"api\" with labels {zone=\"eu\",route=\"/v1\"} is already registered"));
  EXPECT_EQ(reg.size(), 3u);
  EXPECT_TRUE(reg.remove("api", {{"zone", "eu"}, {"route", "/v1"}}));
  EXPECT_FALSE(reg.remove("api", {{"zone", "eu"}, {"route", "/v1"}}));
  reg.add("api", {{"route", "/v1"}, {"zone", "eu"}}, b);
  EXPECT_EQ(reg.size(), 3u);
}

TEST(PrometheusRegistry, ScrapesWhileTheLimitersRun) {
  admit::semaphore sem{2};
  sem.enable_metrics();
  registry reg;
  reg.add("sem", {}, sem);
  std::atomic<bool> stop{false};
  std::vector<std::jthread> workers;
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&] {
      while (!stop.load()) (void)sem.try_acquire();
    });
  }
  for (int i = 0; i < 200; ++i) {
    const std::string text = reg.text();
    ASSERT_THAT(text, HasSubstr("# TYPE admit_wait_seconds histogram\n"));
  }
  stop.store(true);
  workers.clear();
  const auto s = sem.metrics();
  const std::string text = reg.text();
  EXPECT_THAT(text, HasSubstr("admit_admitted_total{limiter=\"sem\"} " + std::to_string(s.admitted) + "\n"));
  EXPECT_THAT(text, HasSubstr("admit_wait_seconds_count{limiter=\"sem\"} " + std::to_string(s.admitted) + "\n"));
}

}  // namespace
