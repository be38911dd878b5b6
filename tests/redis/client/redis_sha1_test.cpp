// SHA-1 test vectors (FIPS 180 examples) and admit::redis::script's name (admit/redis/client/detail/sha1.hpp,
// script.hpp).
#include <gtest/gtest.h>

#include <string>

#include "admit/redis/client/detail/sha1.hpp"
#include "admit/redis/client/script.hpp"

namespace {

using admit::redis::detail::sha1_hex;

TEST(RedisSha1, StandardVectors) {
  EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(sha1_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                     "mnopqrstnopqrstu"),
            "a49b2446a02c645bf419f995b67091253a04a259");
  EXPECT_EQ(sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  EXPECT_EQ(sha1_hex("The quick brown fox jumps over the lazy dog"), "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
}

TEST(RedisSha1, BlockBoundaries) {
  // 55, 56 and 64 bytes: the padding spills into a second block at 56.
  EXPECT_EQ(sha1_hex(std::string(55, 'a')), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(sha1_hex(std::string(56, 'a')), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(sha1_hex(std::string(64, 'a')), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST(RedisSha1, IncrementalEqualsOneShot) {
  admit::redis::detail::sha1 h;
  const std::string text(1000, 'x');
  for (std::size_t i = 0; i < text.size(); i += 7) h.update(std::string_view(text).substr(i, 7));
  EXPECT_EQ(h.hex_digest(), sha1_hex(text));
}

TEST(RedisScript, NameIsTheSha1OfTheSource) {
  const admit::redis::script s("return 1");
  EXPECT_EQ(s.source(), "return 1");
  // What `redis-cli SCRIPT LOAD "return 1"` prints.
  EXPECT_EQ(s.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

}  // namespace
