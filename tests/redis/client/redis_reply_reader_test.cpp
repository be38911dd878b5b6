// The reader that parses Redis's replies (RESP2) into admit::redis::reply values (src/redis/client/reply_reader.hpp):
// the same values as hiredis's own reader gives for the same bytes, however the bytes arrive, and nothing leaked or
// freed twice when the reader fails or is freed with a reply half read (AddressSanitizer checks both in CI).
#include "reply_reader.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using admit::redis::reply;
using admit::redis::detail::make_reply_reader;
using admit::redis::detail::take_reply;

using reader_ptr = std::unique_ptr<redisReader, decltype(&redisReaderFree)>;

// hiredis's own reply, as the reference: the value the bytes mean to hiredis.
reply from_hiredis(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return reply::string(std::string(r->str, r->len));
    case REDIS_REPLY_STATUS:
      return reply::status(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR:
      return reply::error(std::string(r->str, r->len));
    case REDIS_REPLY_INTEGER:
      return reply::integer(r->integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<reply> elements;
      for (std::size_t i = 0; i < r->elements; ++i) elements.push_back(from_hiredis(r->element[i]));
      return reply::array(std::move(elements));
    }
    default:
      return reply();
  }
}

std::string text(const reply& r) {
  std::ostringstream out;
  out << r;
  return out.str();
}

// The replies `bytes` hold, fed in pieces of `piece` bytes (0: all at once), by admit's reader or hiredis's own.
std::vector<std::string> read_all(const std::string& bytes, std::size_t piece, bool admits) {
  const reader_ptr reader(admits ? make_reply_reader() : redisReaderCreate(), &redisReaderFree);
  std::vector<std::string> out;
  const std::size_t step = piece == 0 ? bytes.size() : piece;
  for (std::size_t at = 0; at < bytes.size(); at += step) {
    EXPECT_EQ(redisReaderFeed(reader.get(), bytes.data() + at, std::min(step, bytes.size() - at)), REDIS_OK);
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) {
        ADD_FAILURE() << reader->errstr;
        return out;
      }
      if (raw == nullptr) break;
      if (admits) {
        out.push_back(text(take_reply(raw)));
      } else {
        out.push_back(text(from_hiredis(static_cast<redisReply*>(raw))));
        freeReplyObject(raw);
      }
    }
  }
  return out;
}

// A reader of admit's fed `bytes`, and what its first redisReaderGetReply said: its status and the reply (nullptr: none
// complete yet, or an error).
struct first_reply {
  reader_ptr reader{make_reply_reader(), &redisReaderFree};
  int status = REDIS_ERR;
  void* raw = nullptr;
  explicit first_reply(const std::string& bytes) {
    EXPECT_EQ(redisReaderFeed(reader.get(), bytes.data(), bytes.size()), REDIS_OK);
    status = redisReaderGetReply(reader.get(), &raw);
  }
};

// Every kind of reply, nested, with empty and nil arrays, binary and long strings, and a semaphore batch's shape.
const std::string replies =
    std::string(":42\r\n:-7\r\n+OK\r\n-ERR bad definition 1/0\r\n$0\r\n\r\n$-1\r\n*0\r\n*-1\r\n") + "$5\r\n" +
    std::string("a\0b\r\n", 5) + "\r\n" + "$100\r\n" + std::string(100, 'x') + "\r\n" +
    "*3\r\n:1\r\n*2\r\n$3\r\nabc\r\n$-1\r\n+QUEUED\r\n" + "*2\r\n*2\r\n*1\r\n:5\r\n*0\r\n*1\r\n-WRONGTYPE no\r\n" +
    "*13\r\n:6\r\n:0\r\n:1\r\n:1796534520100643\r\n:1796534520110643\r\n:1796534520100643\r\n:7\r\n"
    ":4\r\n:1\r\n:1796534520100643\r\n:1\r\n:-1\r\n$15\r\nERR not granted\r\n";

TEST(RedisReplyReader, GivesWhatHiredisReadsInTheBytes) {
  const auto expected = read_all(replies, 0, false);
  ASSERT_EQ(expected.size(), 13u);
  EXPECT_EQ(read_all(replies, 0, true), expected);
}

TEST(RedisReplyReader, GivesTheSameRepliesHoweverTheBytesArrive) {
  const auto expected = read_all(replies, 0, false);
  for (const std::size_t piece : {1u, 2u, 3u, 7u, 64u}) EXPECT_EQ(read_all(replies, piece, true), expected) << piece;
}

TEST(RedisReplyReader, KeepsEveryElementsValue) {
  first_reply got("*4\r\n:9\r\n*2\r\n$2\r\nid\r\n$-1\r\n-ERR x\r\n+PONG\r\n");
  ASSERT_EQ(got.status, REDIS_OK);
  ASSERT_NE(got.raw, nullptr);
  const reply r = take_reply(got.raw);
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements().size(), 4u);
  EXPECT_EQ(r.elements()[0].integer(), 9);
  ASSERT_TRUE(r.elements()[1].is_array());
  EXPECT_EQ(r.elements()[1].elements()[0].str(), "id");
  EXPECT_TRUE(r.elements()[1].elements()[1].is_nil());
  EXPECT_TRUE(r.elements()[2].is_error("ERR"));
  EXPECT_TRUE(r.elements()[3].is_status());
  EXPECT_EQ(r.elements()[3].str(), "PONG");
}

// A protocol error in the middle of an array: the reader fails as hiredis's own does, and the half-made reply is
// freed once, with the reader.
TEST(RedisReplyReader, FailsOnBadBytesInsideAnArrayAndFreesWhatItHeld) {
  const first_reply got("*3\r\n:1\r\n*2\r\n$3\r\nabc\r\n?what\r\n");
  EXPECT_EQ(got.status, REDIS_ERR);
  EXPECT_EQ(got.raw, nullptr);
  EXPECT_EQ(got.reader->err, REDIS_ERR_PROTOCOL);
}

// A reader freed with a reply half read (a connection lost mid-reply) frees it.
TEST(RedisReplyReader, FreedWithAReplyHalfReadFreesIt) {
  const first_reply got("*2\r\n*2\r\n$40\r\n" + std::string(40, 'y') + "\r\n:3\r\n*5\r\n:1\r\n");
  ASSERT_EQ(got.status, REDIS_OK);
  EXPECT_EQ(got.raw, nullptr);
}

}  // namespace
