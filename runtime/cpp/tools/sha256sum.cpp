// Prints the portable SHA-256 of a file, as `sha256sum` does. The runner may hash with OpenSSL
// instead; tests hold this implementation, which device builds use, to Python's hashlib.
#include <cstdio>
#include <fstream>
#include <vector>

#include "sha256.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: etspec_sha256sum FILE\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "error: %s: cannot read\n", argv[1]);
    return 1;
  }
  etspec::Sha256 sha;
  std::vector<char> chunk(1 << 16);
  while (f.read(chunk.data(), std::streamsize(chunk.size())) || f.gcount() > 0) {
    sha.update(reinterpret_cast<const uint8_t*>(chunk.data()), size_t(f.gcount()));
  }
  for (uint8_t b : sha.digest()) std::printf("%02x", b);
  std::printf("  %s\n", argv[1]);
  return 0;
}
