// admit/redis/client/detail/sha1.hpp — SHA-1 (FIPS 180-4) of a byte string as 40 lower-case hex digits: the name Redis
// gives a Lua script (EVALSHA). Not for security; written here to avoid a dependency on OpenSSL for one hash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace admit::redis::detail {

class sha1 {
 public:
  void update(std::string_view data) noexcept {
    for (char c : data) {
      block_[fill_++] = static_cast<std::uint8_t>(c);
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
    bytes_ += data.size();
  }

  // The digest as 40 lower-case hex digits. Call once.
  std::string hex_digest() {
    const std::uint64_t bits = static_cast<std::uint64_t>(bytes_) * 8;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < 64) block_[fill_++] = 0;
      compress();
      fill_ = 0;
    }
    while (fill_ < 56) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<std::uint8_t>(bits >> (8 * i));
    compress();
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(40);
    for (std::uint32_t word : h_) {
      for (int i = 7; i >= 0; --i) out.push_back(digits[(word >> (4 * i)) & 0xfu]);
    }
    return out;
  }

 private:
  static std::uint32_t rotl(std::uint32_t x, int n) noexcept { return (x << n) | (x >> (32 - n)); }

  void compress() noexcept {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{block_[4 * i]} << 24) | (std::uint32_t{block_[4 * i + 1]} << 16) |
             (std::uint32_t{block_[4 * i + 2]} << 8) | std::uint32_t{block_[4 * i + 3]};
    }
    for (std::size_t i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (std::size_t i = 0; i < 80; ++i) {
      std::uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999u;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdcu;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6u;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<std::uint32_t, 5> h_{0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
  std::array<std::uint8_t, 64> block_{};
  std::size_t fill_ = 0;
  std::size_t bytes_ = 0;
};

inline std::string sha1_hex(std::string_view data) {
  sha1 h;
  h.update(data);
  return h.hex_digest();
}

}  // namespace admit::redis::detail
