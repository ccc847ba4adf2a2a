// SHA-256 (FIPS 180-4) for the artifact integrity trailer. Builds that find OpenSSL hash with
// it (9x faster here: SHA extensions); device builds (Android, embedded Linux) rarely have it,
// so a portable implementation is always compiled and is what they use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <istream>

namespace etspec {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of the next `size` bytes of `in` (OpenSSL when built with it); false on a short read.
bool sha256(std::istream& in, uint64_t size, Digest& out);

// The portable implementation.

class Sha256 {
 public:
  Sha256();
  void update(const uint8_t* data, size_t size);
  Digest digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace etspec
