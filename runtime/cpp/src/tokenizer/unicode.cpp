#include "unicode.h"

#include <algorithm>
#include <iterator>

namespace etspec::unicode {
namespace {

struct Range {
  uint32_t first, last;
  CodeClass cls;
};

constexpr Range kRanges[] = {
#include "unicode_tables.inc"
};

// The length of the valid UTF-8 sequence at bytes[i..n), or 0 with `bad` set to how many
// bytes form the maximal invalid subpart there (the Unicode "maximal subpart" rule).
size_t sequence_at(const unsigned char* s, size_t i, size_t n, size_t& bad) {
  const unsigned char b = s[i];
  bad = 1;
  if (b < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= n) return 0;  // truncated: bad covers what was valid so far
    const unsigned char c = s[i + k];
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return 0;
    bad = k + 1;
  }
  return need;
}

}  // namespace

CodeClass code_class(uint32_t cp) {
  const auto* end = std::end(kRanges);
  const auto* it =
      std::upper_bound(std::begin(kRanges), end, cp, [](uint32_t c, const Range& r) {
        return c < r.first;
      });
  if (it == std::begin(kRanges)) return kOther;
  --it;
  return cp <= it->last ? it->cls : kOther;
}

size_t char_length(unsigned char b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return b < 0xF8 ? 4 : 1;
}

size_t decode(const std::string& text, std::vector<uint32_t>& cps, std::vector<size_t>& offsets) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  cps.clear();
  offsets.clear();
  for (size_t i = 0; i < n;) {
    size_t bad;
    const size_t len = sequence_at(s, i, n, bad);
    if (len == 0) return i;
    uint32_t cp = len == 1 ? s[i] : s[i] & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    cps.push_back(cp);
    offsets.push_back(i);
    i += len;
  }
  offsets.push_back(n);
  return std::string::npos;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string lossy(const std::string& bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n;) {
    size_t bad;
    const size_t len = sequence_at(s, i, n, bad);
    if (len) {
      out.append(bytes, i, len);
      i += len;
    } else {
      out += kReplacement;
      i += bad;
    }
  }
  return out;
}

bool valid(const std::string& bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = 0, bad; i < bytes.size();) {
    const size_t len = sequence_at(s, i, bytes.size(), bad);
    if (!len) return false;
    i += len;
  }
  return true;
}

}  // namespace etspec::unicode
