#include "tokenizer.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "artifact.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace etspec {

void tokenizer::unsupported(const std::string& what) {
  throw Unsupported(what + " is not supported by the C++ runner");
}

namespace {

bool ends_with_replacement(const std::string& s) {
  const std::string r = unicode::kReplacement;
  return s.size() >= r.size() && s.compare(s.size() - r.size(), r.size(), r) == 0;
}

}  // namespace

std::optional<size_t> invalid_utf8_at(const std::string& text) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  const size_t bad = unicode::decode(text, cps, offsets);
  if (bad == std::string::npos) return std::nullopt;
  return bad;
}

void check_prompt_utf8(const std::string& text) {
  if (const auto bad = invalid_utf8_at(text)) {
    char byte[3];
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(text[*bad]));
    throw Error(message("prompt_not_utf8", {{"byte", byte}, {"offset", std::to_string(*bad)}}));
  }
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;

Tokenizer::Tokenizer(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw tokenizer::Unsupported("not a JSON object");
    added_ = std::make_unique<tokenizer::AddedVocabulary>(j.value("added_tokens", nlohmann::json()));
    normalizer_ = tokenizer::make_normalizer(j.value("normalizer", nlohmann::json()));
    pre_tokenizer_ = tokenizer::make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()));
    decoder_ = tokenizer::make_decoder(j.value("decoder", nlohmann::json()));
    model_ = std::make_unique<tokenizer::Bpe>(j.at("model"));
    const auto post = j.value("post_processor", nlohmann::json());
    const std::string post_type = post.is_object() ? post.value("type", "") : "";
    if (post_type == "TemplateProcessing") {
      bool after = false;
      for (const auto& item : post.at("single")) {
        if (item.contains("Sequence")) {
          after = true;
          continue;
        }
        const auto name = item.at("SpecialToken").at("id").get<std::string>();
        for (const auto& id : post.at("special_tokens").at(name).at("ids")) {
          (after ? suffix_ids_ : prefix_ids_).push_back(id.get<int64_t>());
        }
      }
    } else if (!post.is_null() && post_type != "ByteLevel") {  // ByteLevel: offsets only
      tokenizer::unsupported("post-processor " + post_type);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(message("tokenizer_unreadable", {{"reason", e.what()}}));
  } catch (const tokenizer::Unsupported& e) {
    throw Error(message("tokenizer_unreadable", {{"reason", e.what()}}));
  }
  // runtime/tokenizer.py's run_ids: byte pieces, and special tokens when there are any.
  bool any = false;
  for (int b = 0; b < 256; ++b) {
    const int64_t id = model_->byte_id(static_cast<unsigned char>(b));
    if (id < 0) continue;
    if (id >= static_cast<int64_t>(byte_run_ids_.size())) byte_run_ids_.resize(id + 1);
    byte_run_ids_[id] = any = true;
  }
  if (any) {
    for (int64_t id : added_->special_ids()) {
      if (id >= static_cast<int64_t>(byte_run_ids_.size())) byte_run_ids_.resize(id + 1);
      byte_run_ids_[id] = true;
    }
  }
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool special) const {
  check_prompt_utf8(text);
  // tokenizers' extract_and_normalize: added tokens matched in the raw text, the rest
  // normalized and searched again for normalized added tokens, then pre-tokenized.
  std::vector<tokenizer::Piece> raw, pieces;
  added_->split(text, false, raw);
  for (auto& p : raw) {
    if (p.id >= 0) {
      pieces.push_back(std::move(p));
    } else {
      added_->split(normalizer_ ? normalizer_->normalize(p.text) : p.text, true, pieces);
    }
  }
  std::vector<int64_t> ids;
  if (special) ids = prefix_ids_;
  std::vector<std::string> words;
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    words.clear();
    if (pre_tokenizer_) {
      pre_tokenizer_->split(p.text, words);
    } else {
      words.push_back(p.text);
    }
    for (const auto& w : words) model_->tokenize(w, ids);
  }
  if (special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string* t = added_->id_to_token(id);
    if (!t) t = model_->id_to_token(id);
    if (t && !added_->is_special(*t)) tokens.push_back(*t);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  std::string out;
  for (auto& s : decoder_->decode_chain(std::move(tokens))) out += s;
  return out;
}

bool Tokenizer::in_byte_run(int64_t id) const {
  return id >= 0 && id < static_cast<int64_t>(byte_run_ids_.size()) && byte_run_ids_[id];
}

std::string StreamDecoder::push(const std::vector<int64_t>& ids) {
  all_.insert(all_.end(), ids.begin(), ids.end());
  if (!streaming_ || ids.empty()) return "";
  // A trailing byte run is held back: a later byte may make it invalid UTF-8, and then a
  // one-shot decode turns every byte of the run into U+FFFD, even ones already complete.
  std::vector<int64_t> held = held_;
  held.insert(held.end(), ids.begin(), ids.end());
  size_t cut = held.size();
  while (cut && tokenizer_.in_byte_run(held[cut - 1])) --cut;
  held_.assign(held.begin() + cut, held.end());
  if (!cut) return "";
  // tokenizers' step_decode_stream over the fed ids.
  if (prefix_.empty() && !window_.empty()) {
    std::string p = tokenizer_.decode(window_);
    if (!ends_with_replacement(p)) {
      prefix_ = p;
      prefix_index_ = window_.size();
    }
  }
  window_.insert(window_.end(), held.begin(), held.begin() + cut);
  const std::string s = tokenizer_.decode(window_);
  if (s.size() <= prefix_.size() || ends_with_replacement(s)) return "";
  if (s.compare(0, prefix_.size(), prefix_) != 0) {
    // A decoder whose output does not grow by appending: the rest comes out at flush.
    streaming_ = false;
    return "";
  }
  std::string piece = s.substr(prefix_.size());
  const size_t index = window_.size() - prefix_index_;
  window_.erase(window_.begin(), window_.begin() + prefix_index_);
  prefix_ = tokenizer_.decode(window_);
  prefix_index_ = index;
  text_ += piece;
  return piece;
}

std::string StreamDecoder::flush(const std::string* given) {
  const std::string text = given ? *given : tokenizer_.decode(all_);
  streaming_ = false;
  if (text.compare(0, text_.size(), text_) != 0) return "";  // never seen: stay append-only
  std::string piece = text.substr(text_.size());
  text_ = text;
  return piece;
}

}  // namespace etspec
