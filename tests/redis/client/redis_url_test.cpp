// URL parsing and option validation (admit/redis/client/options.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "admit/redis/client/options.hpp"

namespace {

using admit::redis::parse_url;

// The message of the std::invalid_argument that parse_url throws, or "" if none.
std::string error_of(const std::string& url) {
  try {
    (void)parse_url(url);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RedisUrl, HostAndPort) {
  const auto o = parse_url("redis://example.com:6380");
  EXPECT_EQ(o.host, "example.com");
  EXPECT_EQ(o.port, 6380);
  EXPECT_EQ(o.db, 0);
  EXPECT_TRUE(o.password.empty());
  EXPECT_TRUE(o.unix_path.empty());
}

TEST(RedisUrl, PortDefaultsTo6379) { EXPECT_EQ(parse_url("redis://h").port, 6379); }

TEST(RedisUrl, PasswordAndDatabase) {
  const auto o = parse_url("redis://:s3cret@127.0.0.1:7000/5");
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(o.password, "s3cret");
  EXPECT_TRUE(o.user.empty());
  EXPECT_EQ(o.db, 5);
}

TEST(RedisUrl, UserPasswordPercentDecoded) {
  const auto o = parse_url("redis://alice:p%40ss%3a@h:1/");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "p@ss:");
  EXPECT_EQ(o.db, 0);
}

TEST(RedisUrl, Ipv6) {
  const auto o = parse_url("redis://[::1]:6390/2");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6390);
  EXPECT_EQ(o.db, 2);
  EXPECT_EQ(parse_url("redis://[::1]").port, 6379);
}

TEST(RedisUrl, UnixSocket) {
  const auto o = parse_url("unix:///run/redis/redis.sock");
  EXPECT_EQ(o.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(o.db, 0);
  const auto p = parse_url("unix:///tmp/r.sock?db=3&password=x%20y");
  EXPECT_EQ(p.unix_path, "/tmp/r.sock");
  EXPECT_EQ(p.db, 3);
  EXPECT_EQ(p.password, "x y");
}

TEST(RedisUrl, ErrorsNameTheBadPart) {
  EXPECT_EQ(
      error_of("http://h:1"),
      "redis URL: unsupported scheme (want redis://, rediss://, unix:// or redis+sentinel://) 'http' in 'http://h:1'");
  EXPECT_EQ(error_of("redis://h:99999"), "redis URL: bad port '99999' in 'redis://h:99999'");
  EXPECT_EQ(error_of("redis://h:0"), "redis URL: bad port '0' in 'redis://h:0'");
  EXPECT_EQ(error_of("redis://h:x1"), "redis URL: bad port 'x1' in 'redis://h:x1'");
  EXPECT_EQ(error_of("redis://h:"), "redis URL: empty port 'h:' in 'redis://h:'");
  EXPECT_EQ(error_of("redis://:6379"), "redis URL: empty host ':6379' in 'redis://:6379'");
  EXPECT_EQ(error_of("redis://h:1/abc"), "redis URL: bad database number 'abc' in 'redis://h:1/abc'");
  EXPECT_EQ(error_of("redis://h:1/-1"), "redis URL: bad database number '-1' in 'redis://h:1/-1'");
  EXPECT_EQ(error_of("redis://pw@h:1"),
            "redis URL: credentials need ':' before the password ([user]:password@) '***' in 'redis://***@h:1'");
  EXPECT_EQ(error_of("redis://:@h:1"), "redis URL: empty password ':' in 'redis://:@h:1'");
  EXPECT_EQ(error_of("redis://:%zz@h"), "redis URL: bad percent escape in password '***' in 'redis://:***@h'");
  EXPECT_EQ(error_of("redis://[::1:5"), "redis URL: unterminated IPv6 address '[::1:5' in 'redis://[::1:5'");
  EXPECT_EQ(error_of("unix://relative.sock"),
            "redis URL: socket path must be absolute (unix:///path), got 'relative.sock' in 'unix://relative.sock'");
  EXPECT_EQ(error_of("unix:///s?db=x"), "redis URL: bad database number 'x' in 'unix:///s?db=x'");
  EXPECT_EQ(error_of("unix:///s?timeout=1"),
            "redis URL: unknown query parameter 'timeout' in 'unix:///s?timeout=1' (accepted: db, user, password)");
  EXPECT_EQ(error_of("unix:///s?db"), "redis URL: query parameter without a value 'db' in 'unix:///s?db'");
  EXPECT_EQ(error_of("localhost:6379"),
            "redis URL: no scheme (want redis://, rediss://, unix:// or redis+sentinel://) 'localhost:6379' in "
            "'localhost:6379' (for the server at that address, write redis://localhost:6379)");
  EXPECT_EQ(error_of("/run/redis.sock"),
            "redis URL: no scheme (want redis://, rediss://, unix:// or redis+sentinel://) '/run/redis.sock' in "
            "'/run/redis.sock' (for the socket at that path, write unix:///run/redis.sock)");
}

// What logs show of a URL (admit serve's backend line): every password hidden, the query's too.
TEST(RedisOptions, ARedactedUrlHidesEveryPassword) {
  EXPECT_EQ(admit::redis::redacted_url("redis://:s3cret@h:1/2"), "redis://:***@h:1/2");
  EXPECT_EQ(admit::redis::redacted_url("rediss://alice:s3cret@h"), "rediss://alice:***@h");
  EXPECT_EQ(admit::redis::redacted_url("unix:///s?user=u&password=s3cret&db=1"), "unix:///s?user=u&password=***&db=1");
  EXPECT_EQ(admit::redis::redacted_url("redis://h:6379"), "redis://h:6379");
}

TEST(RedisOptions, ErrorsNeverQuoteThePassword) {
  EXPECT_EQ(error_of("redis://:s3cret@h:99999"), "redis URL: bad port '99999' in 'redis://:***@h:99999'");
  EXPECT_EQ(error_of("redis://alice:s3cret@h:1/x"), "redis URL: bad database number 'x' in 'redis://alice:***@h:1/x'");
  EXPECT_EQ(error_of("valkey://:s3cret@h"),
            "redis URL: unsupported scheme (want redis://, rediss://, unix:// or redis+sentinel://) 'valkey' in "
            "'valkey://:***@h'");
  EXPECT_EQ(error_of("rediss://alice:s3cret@h?server_name=x&bad=1"),
            "redis URL: unknown query parameter 'bad' in 'rediss://alice:***@h?server_name=x&bad=1' (accepted: "
            "ca_file, cert_file, key_file, server_name, insecure_skip_verify)");
  EXPECT_EQ(error_of("localhost:s3cret@h"),
            "redis URL: no scheme (want redis://, rediss://, unix:// or redis+sentinel://) 'localhost:***@h' in "
            "'localhost:***@h' (for the server at that address, write redis://localhost:***@h)");
  EXPECT_EQ(error_of("unix:///s?password=s3cret&db=x"),
            "redis URL: bad database number 'x' in 'unix:///s?password=***&db=x'");
  EXPECT_EQ(error_of("unix:///s?db=1&password=s3cret&x=1"),
            "redis URL: unknown query parameter 'x' in 'unix:///s?db=1&password=***&x=1' (accepted: db, user, "
            "password)");
}

TEST(RedisUrl, TlsSchemeAndParameters) {
  const auto o = parse_url(
      "rediss://limiter:pw@redis.example.com:6380/2?ca_file=%2Fetc%2Fca.pem&cert_file=/c%20d/client.pem&"
      "key_file=/k.pem&server_name=cache.internal&insecure_skip_verify=false");
  EXPECT_TRUE(o.tls);
  EXPECT_EQ(o.host, "redis.example.com");
  EXPECT_EQ(o.port, 6380);
  EXPECT_EQ(o.db, 2);
  EXPECT_EQ(o.user, "limiter");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.tls_ca_file, "/etc/ca.pem");
  EXPECT_EQ(o.tls_cert_file, "/c d/client.pem");
  EXPECT_EQ(o.tls_key_file, "/k.pem");
  EXPECT_EQ(o.tls_server_name, "cache.internal");
  EXPECT_FALSE(o.tls_insecure_skip_verify);
  EXPECT_TRUE(parse_url("rediss://h?insecure_skip_verify=true").tls_insecure_skip_verify);
  EXPECT_EQ(parse_url("rediss://h").port, 6379);
  EXPECT_FALSE(parse_url("redis://h").tls);

  EXPECT_EQ(error_of("redis://h?ca_file=/ca.pem"),
            "redis URL: unknown query parameter 'ca_file' in 'redis://h?ca_file=/ca.pem' (accepted: none (TLS "
            "parameters need rediss://))");
  EXPECT_EQ(error_of("rediss://h?insecure_skip_verify=maybe"),
            "redis URL: bad value for insecure_skip_verify 'maybe' in 'rediss://h?insecure_skip_verify=maybe' (want "
            "true, false, 1, 0, yes or no)");
}

TEST(RedisUrl, UnixSocketUser) {
  const auto o = parse_url("unix:///s?user=limiter&password=pw&db=1");
  EXPECT_EQ(o.user, "limiter");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.db, 1);
}

TEST(RedisOptions, ValidateRejectsTlsMisuse) {
  admit::redis::connection_options o;
  o.tls_ca_file = "/ca.pem";  // without tls
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.tls = true;
  o.tls_cert_file = "/c.pem";  // without its key
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.tls = true;
  o.unix_path = "/s";
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.tls = true;  // through Sentinel: not supported, and said so
  o.sentinel.master_name = "mymaster";
  o.sentinel.sentinels = {{"127.0.0.1", 26379}};
  try {
    admit::redis::validate(o);
    ADD_FAILURE() << "tls through Sentinel was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'mymaster'"), std::string::npos) << e.what();
  }
  o = {};
  o.user = "limiter";  // without a password
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.close_timeout = std::chrono::nanoseconds(-1);
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
}

TEST(RedisOptions, ValidateRejectsNonsense) {
  admit::redis::connection_options o;
  EXPECT_NO_THROW(admit::redis::validate(o));
  o.connect_timeout = std::chrono::nanoseconds(0);
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.reconnect_initial = std::chrono::seconds(5);
  o.reconnect_max = std::chrono::seconds(1);
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o = {};
  o.host.clear();
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
}

// ---- redis+sentinel:// ----

TEST(RedisSentinelUrl, SentinelsMasterNameAndDatabase) {
  const auto o = parse_url("redis+sentinel://10.0.0.1:26380,sentinel-b,[::1]:5000/cache/3");
  ASSERT_EQ(o.sentinel.sentinels.size(), 3u);
  EXPECT_EQ(o.sentinel.sentinels[0], (admit::redis::sentinel_endpoint{"10.0.0.1", 26380}));
  EXPECT_EQ(o.sentinel.sentinels[1], (admit::redis::sentinel_endpoint{"sentinel-b", 26379}));
  EXPECT_EQ(o.sentinel.sentinels[2], (admit::redis::sentinel_endpoint{"::1", 5000}));
  EXPECT_EQ(o.sentinel.master_name, "cache");
  EXPECT_EQ(o.db, 3);
  EXPECT_TRUE(o.password.empty());
  EXPECT_TRUE(o.sentinel.password.empty());
  EXPECT_NO_THROW(admit::redis::validate(o));
}

TEST(RedisSentinelUrl, DataNodeAndSentinelCredentialsAreSeparate) {
  const auto o =
      parse_url("redis+sentinel://app:data%40pw@s1,s2/mymaster?db=2&sentinel_username=watch&sentinel_password=s%26pw");
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "data@pw");
  EXPECT_EQ(o.sentinel.user, "watch");
  EXPECT_EQ(o.sentinel.password, "s&pw");
  EXPECT_EQ(o.db, 2);
  EXPECT_EQ(o.sentinel.master_name, "mymaster");
  EXPECT_EQ(o.sentinel.sentinels.size(), 2u);
}

TEST(RedisSentinelUrl, PasswordOnlyCredentials) {
  const auto o = parse_url("redis+sentinel://:pw@s1:1/m");
  EXPECT_TRUE(o.user.empty());
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.sentinel.sentinels.front().port, 1);
}

TEST(RedisSentinelUrl, ErrorsNameTheBadPartAndHideSecrets) {
  EXPECT_EQ(error_of("redis+sentinel://s1,s2"),
            "redis URL: missing master name (want redis+sentinel://host[:port],.../master_name[/db]) '' in "
            "'redis+sentinel://s1,s2'");
  EXPECT_EQ(error_of("redis+sentinel://s1,,s2/m"),
            "redis URL: empty sentinel address (want host[:port],host[:port]...) '' in 'redis+sentinel://s1,,s2/m'");
  EXPECT_EQ(error_of("redis+sentinel://:pw@s1:0/m"), "redis URL: bad port '0' in 'redis+sentinel://:***@s1:0/m'");
  EXPECT_EQ(error_of("redis+sentinel://s1/m/x"), "redis URL: bad database number 'x' in 'redis+sentinel://s1/m/x'");
  EXPECT_EQ(error_of("redis+sentinel://s1/m/1?db=2"),
            "redis URL: database given twice, differently (path and ?db=) '2' in 'redis+sentinel://s1/m/1?db=2'");
  EXPECT_EQ(error_of("redis+sentinel://s1/m?sentinel_password=top&timeout=1"),
            "redis URL: unknown query parameter 'timeout' in 'redis+sentinel://s1/m?sentinel_password=***&timeout=1' "
            "(accepted: db, sentinel_username, sentinel_password)");
}

TEST(RedisSentinelOptions, ValidateNeedsSentinelsWithAddresses) {
  admit::redis::connection_options o;
  o.sentinel.master_name = "m";
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o.sentinel.sentinels.push_back({"s1", 0});
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
  o.sentinel.sentinels.back().port = 26379;
  EXPECT_NO_THROW(admit::redis::validate(o));
  o.sentinel.sentinels.push_back({"", 26379});
  EXPECT_THROW(admit::redis::validate(o), std::invalid_argument);
}

}  // namespace
