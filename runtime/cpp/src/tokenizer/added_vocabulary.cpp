#include "added_vocabulary.h"

#include <nlohmann/json.hpp>

#include "components.h"

namespace etspec::tokenizer {

void AddedVocabulary::Trie::add(const std::string& s, int64_t id) {
  int64_t node = 0;
  for (unsigned char b : s) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
    auto it = next.find(key);
    node = it != next.end() ? it->second : (next[key] = nodes++);
  }
  ends[node] = id;
}

std::pair<int64_t, size_t> AddedVocabulary::Trie::longest(const std::string& text,
                                                           size_t i) const {
  std::pair<int64_t, size_t> best{-1, 0};
  int64_t node = 0;
  for (size_t k = i; k < text.size(); ++k) {
    const auto it = next.find((static_cast<uint64_t>(node) << 8) |
                              static_cast<unsigned char>(text[k]));
    if (it == next.end()) break;
    node = it->second;
    const auto end = ends.find(node);
    if (end != ends.end()) best = {end->second, k + 1 - i};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(const nlohmann::json& added_tokens) {
  if (added_tokens.is_null()) return;
  for (const auto& t : added_tokens) {
    for (const char* key : {"single_word", "lstrip", "rstrip"}) {
      if (t.value(key, false)) {
        unsupported(std::string("an added token with ") + key);
      }
    }
    const std::string content = t.at("content").get<std::string>();
    const int64_t id = t.at("id").get<int64_t>();
    if (content.empty()) continue;
    tokens_[id] = content;
    if (t.value("special", false)) special_.insert(content);
    (t.value("normalized", false) ? normalized_ : raw_).add(content, id);
  }
}

void AddedVocabulary::split(const std::string& text, bool normalized,
                            std::vector<Piece>& out) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto [id, len] = trie.longest(text, i);
    if (id < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({text.substr(i, len), id});
    i += len;
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
}

const std::string* AddedVocabulary::id_to_token(int64_t id) const {
  const auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second;
}

std::vector<int64_t> AddedVocabulary::special_ids() const {
  std::vector<int64_t> ids;
  for (const auto& [id, token] : tokens_) {
    if (special_.count(token)) ids.push_back(id);
  }
  return ids;
}

}  // namespace etspec::tokenizer
