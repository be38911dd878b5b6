// Tests of `admit replay --format nginx|envoy|csv|jsonl` (src/cli/replay/access_log.hpp, log_time.hpp) on samples
// written from each format's own documentation, and of --per-key (one limiter per key) on a hand-computed case.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli/replay/access_log.hpp"
#include "cli/replay/log_time.hpp"
#include "cli/replay/options.hpp"
#include "cli/replay/replay.hpp"

#include "replay_testing.hpp"

namespace {

using namespace admit::cli;
using namespace admit::cli::replay_testing;

std::vector<log_record> access_log_records(const std::string& text, log_request request,
                                           std::vector<std::string>* keys = nullptr, log_reader** keep = nullptr) {
  static std::istringstream in;
  in.clear();
  in.str(text);
  static std::unique_ptr<log_reader> reader;
  reader = std::make_unique<log_reader>(in, std::move(request));
  std::vector<log_record> out;
  for (log_record r; reader->read(r);) {
    out.push_back(r);
    if (keys != nullptr) keys->emplace_back(r.key);
  }
  if (keep != nullptr) *keep = reader.get();
  return out;
}

log_request access_log_request(log_format f) {
  log_request r;
  r.format = f;
  return r;
}

std::string access_log_error(const std::string& text, log_request request) {
  try {
    (void)access_log_records(text, std::move(request));
  } catch (const trace_error& e) {
    return e.what();
  }
  return "";
}

TEST(LogTime, NginxTimesApplyTheirZone) {
  // nginx's $time_local, as in its log_format documentation: 13:55:36 at -0700 is 20:55:36 UTC.
  const auto a = parse_nginx_time("10/Oct/2000:13:55:36 -0700");
  const auto b = parse_nginx_time("10/Oct/2000:20:55:36 +0000");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*b, 971'211'336 * s);
  EXPECT_EQ(*parse_nginx_time("10/oct/2000:22:55:36.25 +0200"), *b + 250 * ms);
  EXPECT_FALSE(parse_nginx_time("10/Oct/2000:13:55:36"));        // no zone
  EXPECT_FALSE(parse_nginx_time("31/Feb/2000:13:55:36 +0000"));  // no such day
  EXPECT_FALSE(parse_nginx_time("10/Okt/2000:13:55:36 +0000"));  // no such month
  EXPECT_FALSE(parse_nginx_time("10/Oct/2000:13:55:36.1234567891 +0000"));
}

TEST(LogTime, Rfc3339TimesApplyTheirZone) {
  const auto z = parse_rfc3339_time("2016-04-15T20:17:00.310Z");
  ASSERT_TRUE(z);
  EXPECT_EQ(*z, 1'460'751'420 * s + 310 * ms);
  EXPECT_EQ(*parse_rfc3339_time("2016-04-15T22:17:00.310+02:00"), *z);
  EXPECT_EQ(*parse_rfc3339_time("2016-04-15 15:17:00.31-0500"), *z);
  EXPECT_EQ(*parse_rfc3339_time("2016-04-15T20:17:00.310"), *z);  // no zone: UTC
  EXPECT_EQ(*parse_rfc3339_time("2016-04-15T20:17:00.000000001Z"), 1'460'751'420 * s + 1);
  EXPECT_FALSE(parse_rfc3339_time("2016-04-15T20:17:60Z"));
  EXPECT_FALSE(parse_rfc3339_time("2016-04-15"));
  EXPECT_FALSE(parse_rfc3339_time("2016-04-15T20:17:00.Z"));
}

TEST(LogTime, TimesPastTheLargestNanosecondCountAreRefusedNotWrapped) {
  // 2^63 - 1 ns after the epoch is 2262-04-11T23:47:16.854775807Z: the last time that can be told, then none.
  EXPECT_EQ(*parse_rfc3339_time("2262-04-11T23:47:16.854775807Z"), std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(parse_rfc3339_time("2262-04-11T23:47:16.854775808Z"));
  EXPECT_FALSE(parse_rfc3339_time("2610-07-22T23:34:43.709553Z"));  // (wrapped to 2026 + 10 s before)
  EXPECT_FALSE(parse_rfc3339_time("9999-12-31T23:59:59Z"));
  EXPECT_FALSE(parse_nginx_time("22/Jul/2610:23:34:43.709553 +0000"));
  // A zone west of UTC moves a time later: past the end too.
  EXPECT_TRUE(parse_nginx_time("11/Apr/2262:23:00:00 +0000"));
  EXPECT_FALSE(parse_nginx_time("11/Apr/2262:23:00:00 -0100"));
  // And before the epoch: 00:00 at +01:00 is 23:00 UTC the day before (its difference with a time near the end then
  // overflowed).
  EXPECT_EQ(*parse_rfc3339_time("1970-01-01T00:00:00Z"), 0);
  EXPECT_FALSE(parse_rfc3339_time("1970-01-01T00:00:00+01:00"));
  EXPECT_FALSE(parse_nginx_time("01/Jan/1970:00:59:59 +0100"));
}

// Lines of the combined format (nginx's default log_format), the first from nginx's documentation's example: quoted
// fields with spaces and brackets, an IPv6 client, `-` for the user, zones and fractions.
TEST(AccessLog, NginxCombinedAndCommon) {
  const std::string text =
      "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326 "
      "\"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"\n"
      "\n"
      "2001:db8::1 - - [10/Oct/2000:22:55:37.5 +0200] \"POST /login HTTP/1.1\" 401 0 \"-\" \"curl/8.5.0\"\n"
      "127.0.0.1 - - [10/Oct/2000:20:55:40 +0000] \"GET / HTTP/1.1\" 200 612\n";  // the common format
  auto request = access_log_request(log_format::nginx);
  request.per_key = "client";
  std::vector<std::string> keys;
  const auto records = access_log_records(text, request, &keys);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].t_ns, 0);
  EXPECT_EQ(records[1].t_ns, 1500 * ms);
  EXPECT_EQ(records[2].t_ns, 4 * s);
  EXPECT_EQ(records[1].line, 3u);
  EXPECT_EQ(keys, (std::vector<std::string>{"127.0.0.1", "2001:db8::1", "127.0.0.1"}));

  request.per_key = "http_user_agent";
  keys.clear();
  EXPECT_THROW((void)access_log_records(text, request, &keys), trace_error);  // the common line has no user agent
  request.per_key = "remote_user";
  keys.clear();
  (void)access_log_records(text, request, &keys);
  EXPECT_EQ(keys, (std::vector<std::string>{"frank", "-", "-"}));
  request.per_key = "agent";
  EXPECT_THROW((void)access_log_records(text, request), usage_error);
}

TEST(AccessLog, NginxBadLinesNameTheLineAndTheField) {
  const std::string text =
      "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 1\n"
      "127.0.0.1 - - [10/Oct/2000:13:55:36] \"GET / HTTP/1.0\" 200 1\n"
      "127.0.0.1 - - [10/Oct/2000:13:55:37 -0700] \"GET / HTTP/1.0 200 1\n"
      "just words\n"
      "127.0.0.1 - - [10/Oct/2000:13:55:38 -0700] \"GET / HTTP/1.0\" 200 1\n";
  EXPECT_EQ(access_log_error(text, access_log_request(log_format::nginx)),
            "line 2: field \"[$time_local]\": invalid time \"10/Oct/2000:13:55:36\": expected dd/Mon/yyyy:hh:mm:ss "
            "±hhmm, such as 10/Oct/2000:13:55:36 -0700, from 1970 to 2262-04-11");
  auto request = access_log_request(log_format::nginx);
  request.skip_bad_lines = true;
  log_reader* reader = nullptr;
  const auto records = access_log_records(text, request, nullptr, &reader);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].t_ns, 2 * s);
  EXPECT_EQ(reader->skipped(), 3);
}

// Envoy's default format; the first line is the example of Envoy's access log documentation.
TEST(AccessLog, EnvoyDefaultFormat) {
  const std::string text =
      "[2016-04-15T20:17:00.310Z] \"POST /api/v1/locations HTTP/2\" 204 - 154 0 226 100 \"10.0.35.28\" "
      "\"nsq2http\" \"cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2\" \"locations\" \"tcp://10.0.2.1:80\"\n"
      "[2016-04-15T20:17:00.320Z] \"GET /a b HTTP/1.1\" 200 - 0 12 7 5 \"2001:db8::7, 10.0.0.1\" "
      "\"Mozilla/5.0 (X11; Linux x86_64)\" \"id-2\" \"example.com\" \"10.0.2.2:80\"\n"
      "[2016-04-15T20:17:00.300Z] \"GET / HTTP/1.1\" 0 DC 0 0 1 - \"-\" \"-\" \"-\" \"example.com\" \"-\"\n";
  auto request = access_log_request(log_format::envoy);
  request.per_key = "client";
  request.needs_duration = true;
  std::vector<std::string> keys;
  log_reader* reader = nullptr;
  const auto records = access_log_records(text, request, &keys, &reader);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].duration_ns, 226 * ms);
  EXPECT_EQ(records[1].t_ns, 10 * ms);
  EXPECT_EQ(records[1].duration_ns, 7 * ms);
  EXPECT_EQ(records[2].t_ns, 10 * ms);  // 20 ms before the line above: replayed at its time, in file order
  EXPECT_EQ(reader->reordered(), 1);
  EXPECT_EQ(keys, (std::vector<std::string>{"10.0.35.28", "2001:db8::7", "-"}));

  request.per_key = "authority";
  keys.clear();
  (void)access_log_records(text, request, &keys);
  EXPECT_EQ(keys, (std::vector<std::string>{"locations", "example.com", "example.com"}));

  EXPECT_EQ(access_log_error("[2016-04-15T20:17:00.310Z] \"GET / HTTP/1.1\" 200 - 0 0 - - \"-\"\n", request),
            "line 1: field \"%DURATION%\": missing duration \"-\": expected a whole number of milliseconds");
}

TEST(AccessLog, CsvByHeaderNames) {
  const std::string text =
      "ts,client,weight,note\n"
      "2026-12-01T10:00:00Z,10.0.0.1,2,\"a note, with a comma\"\n"
      "1796119200.5,\"2001:db8::1\",1,\"she said \"\"hi\"\"\"\n"
      ",10.0.0.1,1,x\n";
  auto request = access_log_request(log_format::csv);
  request.fields.time = "ts";
  request.fields.cost = "weight";
  request.per_key = "client";
  EXPECT_EQ(access_log_error(text, request), "line 4: field \"ts\": missing time");
  request.skip_bad_lines = true;
  std::vector<std::string> keys;
  const auto records = access_log_records(text, request, &keys);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].n, 2);
  EXPECT_EQ(records[1].t_ns, 500 * ms);  // 1796119200 s since the epoch is 2026-12-01T10:00:00Z
  EXPECT_EQ(keys, (std::vector<std::string>{"10.0.0.1", "2001:db8::1"}));

  request.fields.time = "when";
  EXPECT_EQ(access_log_error(text, request),
            "line 1: the header has no column \"when\" (--time-field); its columns: \"ts\", \"client\", \"weight\", "
            "\"note\"");
  // A column the replay reads that the header names twice is refused (the first was taken in silence); a repeated
  // name it does not read is not its concern.
  request.fields.time = "ts";
  EXPECT_EQ(access_log_error("ts,client,ts,weight\n1,a,2,1\n", request),
            "line 1: the header names the column \"ts\" (--time-field) twice: columns 1 and 3");
  EXPECT_EQ(access_log_records("ts,client,note,weight,note\n1,a,x,1,y\n", request).size(), 1u);
  std::string storage;
  std::vector<std::string_view> fields;
  split_csv_line("a,\"b,c\",\"d\"\"e\",", 1, storage, fields);
  EXPECT_EQ(fields, (std::vector<std::string_view>{"a", "b,c", "d\"e", ""}));
  EXPECT_THROW(split_csv_line("a,\"b", 1, storage, fields), trace_error);
}

TEST(AccessLog, JsonLinesByNameOrPointer) {
  const std::string text =
      "{\"time\": \"2026-12-01T10:00:00.250+01:00\", \"req\": {\"ip\": \"10.0.0.1\"}, \"duration\": \"120ms\"}\n"
      "{\"time\": 1796115600.75, \"req\": {\"ip\": null}, \"duration\": 0.5}\n"
      "{\"time\": \"1796115601\", \"req\": {}, \"duration\": 2}\n";
  auto request = access_log_request(log_format::jsonl);
  request.per_key = "/req/ip";
  request.needs_duration = true;
  std::vector<std::string> keys;
  const auto records = access_log_records(text, request, &keys);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].duration_ns, 120 * ms);
  // 09:00:00.25 UTC, then 09:00:00.75 UTC as a JSON number: a double, exact to about a microsecond this far from 1970
  EXPECT_NEAR(static_cast<double>(records[1].t_ns), 500.0 * ms, 1000.0);
  EXPECT_EQ(records[1].duration_ns, 500 * ms);
  EXPECT_EQ(records[2].t_ns, 750 * ms);
  EXPECT_EQ(records[2].duration_ns, 2 * s);
  EXPECT_EQ(keys, (std::vector<std::string>{"10.0.0.1", "-", "-"}));
  EXPECT_EQ(access_log_error("{\"time\": 1, \"duration\": 1}\n[1, 2]\n", request),
            "line 2: expected a JSON object, found \"[1, 2]\"");
  EXPECT_EQ(access_log_error("{\"t\": 1}\n", request), "line 1: field \"time\": missing time");
  EXPECT_EQ(access_log_error("{\"time\": -1, \"duration\": 1}\n", request),
            "line 1: field \"time\": invalid time \"-1\": expected a number of seconds from 0, or a string");
  // Text that is not JSON says why (it said "expected a JSON object" of an object with a lone surrogate in a string).
  EXPECT_EQ(access_log_error("{\"time\": 1, \"client\": \"\\ud800\"}\n", request).substr(0, 90),
            "line 1: not JSON: parse error at line 1, column 30: syntax error while parsing value - inv");
}

// One token bucket per client, 1/s with a burst of 1, each full on its client's first request:
//   A at 0 admit (0 left), A at 0.5 reject (0.5), B at 0.5 admit, A at 1 admit (1 refilled), B at 1.2 reject (0.7),
//   A at 1.2 reject (0.2). A: 2 of 4 rejected, B: 1 of 2.
TEST(PerKeyReplay, OneLimiterPerKeyAsComputedByHand) {
  const std::string text =
      "{\"time\": 0, \"client\": \"A\"}\n{\"time\": 0.5, \"client\": \"A\"}\n{\"time\": 0.5, \"client\": \"B\"}\n"
      "{\"time\": 1, \"client\": \"A\"}\n{\"time\": 1.2, \"client\": \"B\"}\n{\"time\": 1.2, \"client\": \"A\"}\n";
  auto o = options_for("token-bucket", "1/s");
  o.format = "jsonl";
  o.per_key = "client";
  o.json = true;
  std::istringstream in(text);
  std::ostringstream out, err;
  ASSERT_EQ(run_replay(o, in, out, err), exit_ok) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["admitted"]["arrivals"], 3);
  EXPECT_EQ(j["rejected"]["arrivals"], 3);
  EXPECT_EQ(j["keys"], 2);
  EXPECT_EQ(j["keys_with_rejections"], 2);
  ASSERT_EQ(j["most_limited_keys"].size(), 2u);
  EXPECT_EQ(j["most_limited_keys"][0]["key"], "A");
  EXPECT_EQ(j["most_limited_keys"][0]["arrivals"], 4);
  EXPECT_EQ(j["most_limited_keys"][0]["rejected"]["arrivals"], 2);
  EXPECT_EQ(j["most_limited_keys"][1]["key"], "B");
  EXPECT_EQ(j["most_limited_keys"][1]["rejected"]["arrivals"], 1);

  // Without --per-key one bucket serves everybody: 0 admit, then 1 admit, the rest rejected.
  o.per_key.reset();
  std::istringstream again(text);
  std::ostringstream out2, err2;
  ASSERT_EQ(run_replay(o, again, out2, err2), exit_ok) << err2.str();
  EXPECT_EQ(nlohmann::json::parse(out2.str())["admitted"]["arrivals"], 2);

  o.json = false;
  o.per_key = "client";
  std::istringstream text_in(text);
  std::ostringstream out3, err3;
  ASSERT_EQ(run_replay(o, text_in, out3, err3), exit_ok) << err3.str();
  EXPECT_NE(out3.str().find("keys:     2 keys (--per-key client), 2 with rejections\n"), std::string::npos)
      << out3.str();
}

TEST(PerKeyReplay, OptionsThatDoNotFitAreRefused) {
  auto o = options_for("token-bucket", "1/s");
  o.per_key = "client";
  EXPECT_THROW((void)to_log_request(o), usage_error);  // the plain trace has no keys
  o.format = "apache";
  EXPECT_THROW((void)to_log_request(o), usage_error);
  o.format = "nginx";
  o.time_field = "ts";
  EXPECT_THROW((void)to_log_request(o), usage_error);  // nginx's fields are in place
  replay_options c;
  c.algorithm = "concurrency";
  c.format = "nginx";
  EXPECT_THROW((void)to_log_request(c), usage_error);  // no duration
  auto agent = options_for("gcra", "1/s");
  agent.format = "nginx";
  agent.per_key = "agent";
  std::istringstream none("");
  std::ostringstream agent_out, agent_err;
  EXPECT_EQ(run_replay(agent, none, agent_out, agent_err), exit_bad_input);
  EXPECT_EQ(agent_err.str(),
            "admit replay: --per-key \"agent\" is not a field of the nginx format; use client or "
            "remote_addr|remote_user|time_local|request|status|body_bytes_sent|http_referer|http_user_agent\n");
  std::istringstream in("127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 1\nbad line\n");
  auto bad = options_for("gcra", "1/s");
  bad.format = "nginx";
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(bad, in, out, err), exit_bad_input);
  EXPECT_EQ(err.str(),
            "admit replay: stdin: line 2: expected nginx's combined or common log format, found 2 fields in \"bad "
            "line\"\n");
}

}  // namespace
