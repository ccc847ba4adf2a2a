// UTF-8 and the code-point classes the tokenizer needs, with the semantics of the Rust
// `tokenizers` library the Python runtime uses (its regex classes, from_utf8_lossy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etspec::unicode {

enum CodeClass : uint8_t { kOther, kLetter, kNumber, kSpace };

// \p{L}, \p{N} or \s as tokenizers' regex engine classifies `cp` (unicode_tables.inc).
CodeClass code_class(uint32_t cp);

// The code points of valid UTF-8 `text` and the byte offset each starts at (plus a final
// offset == text.size()). Returns the offset of the first invalid byte, or npos if valid.
size_t decode(const std::string& text, std::vector<uint32_t>& cps, std::vector<size_t>& offsets);

void append(std::string& out, uint32_t cp);

// `bytes` as UTF-8, each maximal invalid subsequence replaced by one U+FFFD (Rust's
// String::from_utf8_lossy, Python's bytes.decode("utf-8", "replace")).
std::string lossy(const std::string& bytes);

bool valid(const std::string& bytes);

// The length in bytes of the UTF-8 character starting with lead byte `b` (1 for a byte
// that cannot start one).
size_t char_length(unsigned char b);

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace etspec::unicode
