// The BPE model of an HF tokenizer.json (tokenizers' models::bpe): characters (or, with
// byte_fallback, <0xXX> byte pieces, else the unknown token) merged pair by pair, the
// lowest-ranked merge first and the leftmost among equals.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace etspec::tokenizer {

class Bpe {
 public:
  explicit Bpe(const nlohmann::json& model);
  // Appends the ids of one pre-tokenized word.
  void tokenize(const std::string& word, std::vector<int64_t>& out) const;
  // nullptr for an id outside the vocabulary.
  const std::string* id_to_token(int64_t id) const;
  int64_t token_to_id(const std::string& token) const;  // -1 when absent
  int64_t byte_id(unsigned char b) const { return byte_ids_[b]; }  // <0xXX>, -1 when absent

 private:
  void merge(std::vector<int64_t>& ids) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> tokens_;  // by id
  std::vector<bool> has_token_;
  // (left id, right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<uint32_t, int64_t>> merges_;
  int64_t unk_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int64_t byte_ids_[256];  // <0xXX> ids for byte_fallback, -1 where missing
};

}  // namespace etspec::tokenizer
