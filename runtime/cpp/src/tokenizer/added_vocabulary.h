// The added tokens of an HF tokenizer.json (special tokens such as <|endoftext|> or <bos>,
// and user-defined ones): matched whole in the text before the model sees it, leftmost
// first and longest among those, as tokenizers' AddedVocabulary does.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace etspec::tokenizer {

// A stretch of text: an added token's id, or -1 for text the model tokenizes.
struct Piece {
  std::string text;
  int64_t id = -1;
};

class AddedVocabulary {
 public:
  explicit AddedVocabulary(const nlohmann::json& added_tokens);
  // Splits `text` around the added tokens that match before (normalized == false) or after
  // (true) normalization.
  void split(const std::string& text, bool normalized, std::vector<Piece>& out) const;
  const std::string* id_to_token(int64_t id) const;
  bool is_special(const std::string& token) const { return special_.count(token) > 0; }
  std::vector<int64_t> special_ids() const;

 private:
  struct Trie {
    std::unordered_map<uint64_t, int64_t> next;  // (node << 8 | byte) -> node
    std::unordered_map<int64_t, int64_t> ends;   // node -> token id
    int64_t nodes = 1;
    void add(const std::string& s, int64_t id);
    // The id and length of the longest token starting at text[i], or {-1, 0}.
    std::pair<int64_t, size_t> longest(const std::string& text, size_t i) const;
  };
  Trie raw_, normalized_;
  std::unordered_map<int64_t, std::string> tokens_;
  std::set<std::string> special_;
};

}  // namespace etspec::tokenizer
