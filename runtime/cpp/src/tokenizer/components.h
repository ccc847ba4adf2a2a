// The parts of an HF tokenizer.json the C++ runner implements, each with the semantics of
// the Rust `tokenizers` library the Python runtime uses: normalizers (Replace, Prepend,
// Sequence), pre-tokenizers (ByteLevel with the GPT-2 split, Split on a string, Sequence),
// decoders (ByteLevel, ByteFallback, Replace, Fuse, Strip, Sequence). Anything else is
// refused when the tokenizer is read, never approximated.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace etspec::tokenizer {

// Thrown for a tokenizer.json this implementation cannot read; Tokenizer wraps it in the
// contract's tokenizer_unreadable message.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws Unsupported naming `what` (e.g. "normalizer NFC").
[[noreturn]] void unsupported(const std::string& what);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(const std::string& text) const = 0;
};

// Splits pieces of text into smaller pieces (and may rewrite them, as ByteLevel does).
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(const std::string& piece, std::vector<std::string>& out) const = 0;
};

// decode_chain: tokens in, strings out (joined by the caller), as tokenizers' Decoder.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// null JSON gives nullptr (no such stage).
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

// GPT-2's byte-to-character table (the ByteLevel alphabet): byte b is written as
// byte_char(b), a printable code point.
uint32_t byte_char(unsigned char b);

// The pieces of `text` under GPT-2's pre-tokenizer regex,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched by hand (no regex engine: std::regex recurses per character and overflows the
// stack on long inputs, and has no Unicode classes). `text` must be valid UTF-8.
void gpt2_split(const std::string& text, std::vector<std::string>& out);

}  // namespace etspec::tokenizer
