#include "bpe.h"

#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "components.h"
#include "unicode.h"

namespace etspec::tokenizer {
namespace {

uint64_t pair_key(int64_t a, int64_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

Bpe::Bpe(const nlohmann::json& model) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") unsupported("model " + type);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && !model[key].get<std::string>().empty()) {
      unsupported(std::string("BPE ") + key);
    }
  }
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0) {
    unsupported("BPE dropout");
  }
  int64_t size = 0;
  for (const auto& [token, id] : model.at("vocab").items()) {
    const int64_t i = id.get<int64_t>();
    if (i < 0 || i > (int64_t{1} << 31)) throw Unsupported("a vocabulary id out of range");
    vocab_[token] = i;
    size = std::max(size, i + 1);
  }
  tokens_.assign(size, {});
  has_token_.assign(size, false);
  for (const auto& [token, id] : vocab_) {
    tokens_[id] = token;
    has_token_[id] = true;
  }
  // Merges are "a b" strings or [a, b] pairs; a later duplicate replaces an earlier one.
  uint32_t rank = 0;
  for (const auto& m : model.at("merges")) {
    std::string a, b;
    if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      const std::string s = m.get<std::string>();
      const size_t cut = s.find(' ');
      if (cut == std::string::npos) throw Unsupported("a merge without two parts: " + s);
      a = s.substr(0, cut);
      b = s.substr(cut + 1);
    }
    const int64_t ia = token_to_id(a), ib = token_to_id(b), merged = token_to_id(a + b);
    if (ia < 0 || ib < 0 || merged < 0) {
      throw Unsupported("a merge of tokens outside the vocabulary (" + a + " " + b + ")");
    }
    merges_[pair_key(ia, ib)] = {rank++, merged};
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    unk_ = token_to_id(model["unk_token"].get<std::string>());
    if (unk_ < 0) throw Unsupported("its unknown token is not in the vocabulary");
  }
  fuse_unk_ = model.value("fuse_unk", false);
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = token_to_id(name);
  }
}

int64_t Bpe::token_to_id(const std::string& token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* Bpe::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(tokens_.size()) || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void Bpe::tokenize(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int64_t whole = token_to_id(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // tokenizers' merge_word: one symbol per character; a character outside the vocabulary
  // becomes its <0xXX> pieces (byte_fallback, when all exist) or the unknown token (runs of
  // unknowns fused into one with fuse_unk).
  std::vector<int64_t> ids;
  int64_t pending_unk = -1;
  const auto* s = reinterpret_cast<const unsigned char*>(word.data());
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(unicode::char_length(s[i]), word.size() - i);
    const int64_t id = token_to_id(word.substr(i, len));
    if (id >= 0) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(id);
    } else {
      bool bytes = byte_fallback_;
      for (size_t k = 0; bytes && k < len; ++k) bytes = byte_ids_[s[i + k]] >= 0;
      if (bytes) {
        // As tokenizers: a pending unknown is not flushed first (it follows these pieces).
        for (size_t k = 0; k < len; ++k) ids.push_back(byte_ids_[s[i + k]]);
      } else if (unk_ >= 0) {
        if (pending_unk >= 0 && !fuse_unk_) ids.push_back(pending_unk);
        pending_unk = unk_;
      }
    }
    i += len;
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

void Bpe::merge(std::vector<int64_t>& ids) const {
  struct Symbol {
    int64_t id;
    int64_t prev, next;
    bool alive;
  };
  struct Merge {
    uint32_t rank;
    int64_t pos, merged;
    bool operator>(const Merge& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int64_t n = ids.size();
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  for (int64_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> queue;
  auto offer = [&](int64_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const auto it = merges_.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int64_t i = 0; i + 1 < n; ++i) offer(i);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    const Symbol& right = sym[left.next];
    // An entry made stale by an earlier merge no longer names this pair's result.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.merged) continue;
    const int64_t gone = left.next;
    left.id = top.merged;
    left.next = right.next;
    sym[gone].alive = false;
    if (left.next >= 0) sym[left.next].prev = top.pos;
    offer(left.prev);
    offer(top.pos);
  }
  ids.clear();
  for (int64_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
}

}  // namespace etspec::tokenizer
