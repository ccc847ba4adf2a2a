// runtime/tokenizer.py: the tokenizer that travels inside the target artifact (its HF
// tokenizer.json), encoding as HF `tokenizer(text)` and decoding with special tokens
// skipped, exactly as the Python runtime's `tokenizers` does (tests/test_cpp_tokenizer.py
// holds both to each other on a corpus of hard strings); and StreamDecoder, which releases
// text for streaming only once it is complete characters.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace etspec {

namespace tokenizer {
class AddedVocabulary;
class Bpe;
class Decoder;
class Normalizer;
class PreTokenizer;
}  // namespace tokenizer

// The offset of the first byte of `text` that is not valid UTF-8; nullopt if all is.
std::optional<size_t> invalid_utf8_at(const std::string& text);
// Throws Error (the contract's prompt_not_utf8) for a prompt that is not valid UTF-8.
void check_prompt_utf8(const std::string& text);

class Tokenizer {
 public:
  // `json`: a tokenizer.json. Throws Error (the contract's tokenizer_unreadable) for one
  // that does not parse or uses a part this implementation does not have.
  explicit Tokenizer(const std::string& json);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;

  // The ids of `text` with the special tokens the file's post-processor adds (e.g. <bos>),
  // or without them (`special` false: a rendered chat template wrote its own). Throws
  // Error (prompt_not_utf8) for text that is not valid UTF-8.
  std::vector<int64_t> encode(const std::string& text, bool special = true) const;
  // The text of `ids`, special tokens skipped; invalid UTF-8 becomes U+FFFD.
  std::string decode(const std::vector<int64_t>& ids) const;
  // Whether `id` may be part of a byte-fallback run (a <0xXX> piece, or a special token,
  // which decoding skips): a stream holds such ids back until the run is complete.
  bool in_byte_run(int64_t id) const;

 private:
  std::unique_ptr<tokenizer::Normalizer> normalizer_;
  std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tokenizer::Bpe> model_;
  std::unique_ptr<tokenizer::Decoder> decoder_;
  std::unique_ptr<tokenizer::AddedVocabulary> added_;
  std::vector<int64_t> prefix_ids_, suffix_ids_;  // the post-processor's single template
  std::vector<bool> byte_run_ids_;
};

// Turns a growing list of ids into text pieces for streaming, in linear time, as
// runtime/tokenizer.py's StreamDecoder (tokenizers' DecodeStream, plus byte-fallback runs
// held back whole): the pieces, then flush(), concatenate to decode() of every pushed id.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(const std::vector<int64_t>& ids);
  // The text not yet released. `text`: decode() of every pushed id, when the caller has it.
  std::string flush(const std::string* text = nullptr);

 private:
  const Tokenizer& tokenizer_;
  std::vector<int64_t> all_;     // every pushed id
  std::string text_;             // what has been released
  std::vector<int64_t> held_;    // a trailing byte run, not yet fed
  std::vector<int64_t> window_;  // DecodeStream's ids
  std::string prefix_;
  size_t prefix_index_ = 0;
  bool streaming_ = true;
};

}  // namespace etspec
