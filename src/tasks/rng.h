// The generators' random numbers: splitmix64, so a seed gives the same samples on every
// platform and standard library (std::uniform_*_distribution does not guarantee that).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvslim::tasks {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias (draws below 2^64 mod n are rejected).
  uint64_t below(uint64_t n) {
    const uint64_t reject_below = (0 - n) % n;
    for (;;) {
      const uint64_t r = next();
      if (r >= reject_below) return r % n;
    }
  }

  // Uniform in [lo, hi].
  int64_t between(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo) + 1)); }

  template <class T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

  // Fisher-Yates.
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  uint64_t state_;
};

// The seed of one sample: FNV-1a over the task name, then the length and the user's seed mixed in,
// so every (task, length, seed) triple starts its own stream.
inline uint64_t sample_seed(std::string_view task, int64_t target_tokens, uint64_t seed) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : task) h = (h ^ uint8_t(c)) * 0x100000001B3ull;
  Rng mix(h ^ (uint64_t(target_tokens) * 0x9E3779B97F4A7C15ull));
  return mix.next() ^ Rng(seed).next();
}

// `count` decimal digits, the first one non-zero (a number of exactly that many digits).
inline std::string random_digits(Rng& rng, int count) {
  std::string digits(size_t(count), '0');
  digits[0] = char('1' + rng.below(9));
  for (int i = 1; i < count; ++i) digits[size_t(i)] = char('0' + rng.below(10));
  return digits;
}

// `count` upper-case letters (variable tracking's variable names).
inline std::string random_letters(Rng& rng, int count) {
  std::string letters(size_t(count), 'A');
  for (char& c : letters) c = char('A' + rng.below(26));
  return letters;
}

// Items from `make` until one not in `used`, which is recorded there and returned: draws
// without repeats within a sample (keys, values, names).
template <class Make>
std::string draw_distinct(std::set<std::string>& used, Make make) {
  for (;;) {
    std::string item = make();
    if (used.insert(item).second) return item;
  }
}

// A version-4 UUID in lower-case 8-4-4-4-12 form, as Python's uuid.UUID(version=4) prints one.
inline std::string random_uuid(Rng& rng) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) {
    int nibble = int(rng.below(16));
    if (i == 12) nibble = 4;                 // version
    if (i == 16) nibble = 8 | (nibble & 3);  // variant 10xx
    if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
    out += hex[nibble];
  }
  return out;
}

}  // namespace kvslim::tasks
