// admit/detail/keyed_table.hpp — the hash table of one shard of admit::keyed: open addressing with linear probing,
// one tag byte per slot, and backward-shift deletion (no tombstones, so lookups stay short however many keys are
// evicted). Not thread-safe: the shard's lock guards it.
//
// Memory: capacity · (sizeof(Key) + sizeof(State) + 1) bytes in two arrays, plus whatever the keys allocate. The load
// factor stays at or under 3/4; the capacity doubles up to a limit (enough for the shard's key cap at 3/4) and is not
// rounded to a power of two: a slot's home is the hash's low 32 bits scaled to the capacity (multiply-shift).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace admit::detail {

// A 64-bit finalizer (murmur3's fmix64), so that hashes that are the identity (std::hash of integers) still spread
// over shards (top bits), slots (low bits) and tags.
[[nodiscard]] constexpr std::uint64_t mix_hash(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

template <class Key, class State>
class keyed_table {
 public:
  struct slot {
    Key key;
    State state;
  };

  keyed_table() = default;
  keyed_table(const keyed_table&) = delete;
  keyed_table& operator=(const keyed_table&) = delete;
  ~keyed_table() { release(); }

  // The most slots the table may ever have (at least 1). Set once, before use.
  void set_capacity_limit(std::size_t limit) noexcept { limit_ = limit < 1 ? 1 : limit; }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
  [[nodiscard]] bool occupied(std::size_t i) const noexcept { return tags_[i] != 0; }
  [[nodiscard]] slot& at(std::size_t i) noexcept { return slots_[i]; }

  // The slot holding a key equal to `k` (hash h, mixed), or npos.
  template <class K, class Eq>
  [[nodiscard]] std::size_t find(const K& k, std::uint64_t h, const Eq& eq) const noexcept {
    if (size_ == 0) return npos;
    const std::uint8_t tag = tag_of(h);
    for (std::size_t i = home(h);; i = next(i)) {
      const std::uint8_t t = tags_[i];
      if (t == 0) return npos;
      if (t == tag && eq(slots_[i].key, k)) return i;
    }
  }

  // The slot on h's probe path whose slot satisfies pred(const slot&), or npos (for a table whose states identify
  // their slot, as pointers do: finds an entry without its key).
  template <class Pred>
  [[nodiscard]] std::size_t find_if(std::uint64_t h, const Pred& pred) const noexcept {
    if (size_ == 0) return npos;
    const std::uint8_t tag = tag_of(h);
    for (std::size_t i = home(h);; i = next(i)) {
      const std::uint8_t t = tags_[i];
      if (t == 0) return npos;
      if (t == tag && pred(slots_[i])) return i;
    }
  }

  // Whether one more key fits without growing beyond the capacity limit (load factor 3/4).
  [[nodiscard]] bool can_insert() const noexcept { return fits(size_ + 1, cap_) || cap_ < limit_; }

  // Inserts a key known to be absent (hash h). Requires can_insert(). May allocate (and throw std::bad_alloc, or
  // whatever Key's constructor throws), leaving the table unchanged. Returns the slot.
  template <class K, class HashFn>
  std::size_t insert(const K& k, std::uint64_t h, const State& s, const HashFn& hash) {
    assert(can_insert());
    if (!fits(size_ + 1, cap_)) grow(hash);
    std::size_t i = home(h);
    while (tags_[i] != 0) i = next(i);
    std::construct_at(&slots_[i], slot{Key(k), s});
    tags_[i] = tag_of(h);
    ++size_;
    return i;
  }

  // Removes the key in slot i and shifts the keys after it back over the gap (backward-shift deletion), so that every
  // key stays reachable from its home without tombstones. The slot i may hold another key afterwards.
  template <class HashFn>
  void erase_at(std::size_t i, const HashFn& hash) noexcept {
    assert(occupied(i));
    std::destroy_at(&slots_[i]);
    tags_[i] = 0;
    --size_;
    for (std::size_t j = next(i);; j = next(j)) {
      if (tags_[j] == 0) return;
      const std::size_t k = home(hash(slots_[j].key));
      // The key at j may stay when its home lies cyclically in (i, j]: the gap at i is not on its probe path.
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) continue;
      std::construct_at(&slots_[i], std::move(slots_[j]));
      std::destroy_at(&slots_[j]);
      tags_[i] = tags_[j];
      tags_[j] = 0;
      i = j;
    }
  }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  static bool fits(std::size_t n, std::size_t cap) noexcept { return n * 4 <= cap * 3; }
  static std::uint8_t tag_of(std::uint64_t h) noexcept { return static_cast<std::uint8_t>(0x80U | (h >> 32 & 0x7fU)); }
  std::size_t home(std::uint64_t h) const noexcept {
    return static_cast<std::size_t>(((h & 0xffffffffULL) * static_cast<std::uint64_t>(cap_)) >> 32);
  }
  std::size_t next(std::size_t i) const noexcept { return i + 1 == cap_ ? 0 : i + 1; }

  template <class HashFn>
  void grow(const HashFn& hash) {
    std::size_t cap = cap_ < 8 ? 8 : cap_ * 2;
    if (cap > limit_) cap = limit_;
    if (!fits(size_ + 1, cap)) cap = size_ + 1 + (size_ + 1) / 3 + 1;  // only when the limit is below 3/4 load
    auto tags = std::make_unique<std::uint8_t[]>(cap);                 // zeroed: all empty
    slot* slots = std::allocator<slot>{}.allocate(cap);
    const std::size_t old_cap = std::exchange(cap_, cap);
    std::uint8_t* old_tags = tags_.release();
    slot* old_slots = std::exchange(slots_, slots);
    tags_.reset(tags.release());
    for (std::size_t j = 0; j < old_cap; ++j) {
      if (old_tags[j] == 0) continue;
      const std::uint64_t h = hash(old_slots[j].key);
      std::size_t i = home(h);
      while (tags_[i] != 0) i = next(i);
      std::construct_at(&slots_[i], std::move(old_slots[j]));
      std::destroy_at(&old_slots[j]);
      tags_[i] = old_tags[j];
    }
    delete[] old_tags;
    if (old_slots != nullptr) std::allocator<slot>{}.deallocate(old_slots, old_cap);
  }

  void release() noexcept {
    for (std::size_t i = 0; i < cap_; ++i) {
      if (tags_[i] != 0) std::destroy_at(&slots_[i]);
    }
    if (slots_ != nullptr) std::allocator<slot>{}.deallocate(slots_, cap_);
    slots_ = nullptr;
    tags_.reset();
    cap_ = size_ = 0;
  }

  std::unique_ptr<std::uint8_t[]> tags_;  // 0: empty; else 0x80 | 7 bits of the hash
  slot* slots_ = nullptr;                 // constructed where the tag is non-zero
  std::size_t cap_ = 0;
  std::size_t size_ = 0;
  std::size_t limit_ = static_cast<std::size_t>(1) << 31;
};

}  // namespace admit::detail
