#include "components.h"

#include <array>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "unicode.h"

namespace etspec::tokenizer {
namespace {

using nlohmann::json;

std::string type_of(const json& j, const char* stage) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Unsupported(std::string(stage) + " without a type");
  }
  return j["type"].get<std::string>();
}

[[noreturn]] void refuse(const char* stage, const std::string& what) {
  tokenizer::unsupported(std::string(stage) + " " + what);
}

// A pattern given as {"String": "..."}; regex patterns need an engine this build lacks.
std::string string_pattern(const json& j, const char* stage) {
  const json& p = j.at("pattern");
  if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    return p["String"].get<std::string>();
  }
  refuse(stage, "with a Regex pattern");
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::string out;
  size_t i = 0;
  for (size_t k; (k = s.find(from, i)) != std::string::npos; i = k + from.size()) {
    out.append(s, i, k - i);
    out += to;
  }
  out.append(s, i, std::string::npos);
  s.swap(out);
}

// --- normalizers ---------------------------------------------------------------------------

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  std::string normalize(const std::string& text) const override {
    std::string s = text;
    replace_all(s, from_, to_);
    return s;
  }

 private:
  std::string from_, to_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(const std::string& text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class NormalizerSequence : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize(const std::string& text) const override {
    std::string s = text;
    for (const auto& p : parts_) s = p->normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// --- pre-tokenizers ------------------------------------------------------------------------

const std::array<uint32_t, 256>& byte_chars() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void split(const std::string& piece, std::vector<std::string>& out) const override {
    std::string text = piece;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) text = " " + text;
    std::vector<std::string> parts;
    if (use_regex_) {
      gpt2_split(text, parts);
    } else {
      parts.push_back(text);
    }
    for (const auto& p : parts) {
      std::string mapped;
      mapped.reserve(p.size() * 2);
      for (unsigned char b : p) unicode::append(mapped, byte_chars()[b]);
      out.push_back(std::move(mapped));
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// tokenizers' Split with a string pattern: the literal's non-overlapping matches, and the
// text between them, regrouped as `behavior` says (its SplitDelimiterBehavior).
class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string pattern, Behavior behavior)
      : pattern_(std::move(pattern)), behavior_(behavior) {}
  void split(const std::string& piece, std::vector<std::string>& out) const override {
    struct Span {
      size_t start, end;
      bool match;
    };
    std::vector<Span> spans;
    size_t prev = 0;
    if (!pattern_.empty()) {
      for (size_t k; (k = piece.find(pattern_, prev)) != std::string::npos;
           prev = k + pattern_.size()) {
        if (k != prev) spans.push_back({prev, k, false});
        spans.push_back({k, k + pattern_.size(), true});
      }
    }
    if (prev != piece.size()) spans.push_back({prev, piece.size(), false});
    std::vector<Span> kept;
    bool previous_match = false;
    switch (behavior_) {
      case Behavior::kRemoved:
        for (const auto& s : spans) {
          if (!s.match) kept.push_back(s);
        }
        break;
      case Behavior::kIsolated:
        kept = spans;
        break;
      case Behavior::kMergedWithPrevious:
        for (const auto& s : spans) {
          if (s.match && !previous_match && !kept.empty()) {
            kept.back().end = s.end;
          } else {
            kept.push_back(s);
          }
          previous_match = s.match;
        }
        break;
      case Behavior::kMergedWithNext:
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
          if (it->match && !previous_match && !kept.empty()) {
            kept.back().start = it->start;
          } else {
            kept.push_back(*it);
          }
          previous_match = it->match;
        }
        std::reverse(kept.begin(), kept.end());
        break;
      case Behavior::kContiguous:
        for (const auto& s : spans) {
          if (s.match && previous_match && !kept.empty()) {
            kept.back().end = s.end;
          } else {
            kept.push_back(s);
          }
          previous_match = s.match;
        }
        break;
    }
    for (const auto& s : kept) {
      if (s.end > s.start) out.push_back(piece.substr(s.start, s.end - s.start));
    }
  }

 private:
  std::string pattern_;
  Behavior behavior_;
};

class PreTokenizerSequence : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(const std::string& piece, std::vector<std::string>& out) const override {
    std::vector<std::string> pieces{piece}, next;
    for (const auto& p : parts_) {
      next.clear();
      for (const auto& s : pieces) p->split(s, next);
      pieces.swap(next);
    }
    for (auto& s : pieces) out.push_back(std::move(s));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// --- decoders ------------------------------------------------------------------------------

class ByteLevelDecoder : public Decoder {
 public:
  ByteLevelDecoder() {
    for (int b = 0; b < 256; ++b) bytes_[byte_chars()[b]] = static_cast<unsigned char>(b);
  }
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    std::vector<uint32_t> cps;
    std::vector<size_t> offsets;
    for (const auto& t : tokens) {
      // A token with a character outside the byte alphabet passes through as its own UTF-8.
      std::string mine;
      bool ok = unicode::decode(t, cps, offsets) == std::string::npos;
      for (size_t i = 0; ok && i < cps.size(); ++i) {
        const auto it = bytes_.find(cps[i]);
        ok = it != bytes_.end();
        if (ok) mine += static_cast<char>(it->second);
      }
      bytes += ok ? mine : t;
    }
    return {unicode::lossy(bytes)};
  }

 private:
  std::map<uint32_t, unsigned char> bytes_;
};

// <0xXX> pieces gathered into runs: a valid UTF-8 run becomes its text, an invalid one one
// U+FFFD per byte (tokenizers' ByteFallback; not the maximal-subpart rule).
class ByteFallbackDecoder : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (unicode::valid(run)) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run.size(); ++i) out.push_back(unicode::kReplacement);
      }
      run.clear();
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4]))) {
        byte = std::stoi(t.substr(3, 2), nullptr, 16);
      }
      if (byte >= 0) {
        run += static_cast<char>(byte);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) replace_all(t, from_, to_);
    return tokens;
  }

 private:
  std::string from_, to_;
};

class FuseDecoder : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    return {all};
  }
};

// Strip: up to `start` leading and `stop` trailing copies of one character per token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) {
      for (size_t i = 0; i < start_ && t.compare(0, content_.size(), content_) == 0; ++i) {
        t.erase(0, content_.size());
      }
      for (size_t i = 0; i < stop_ && t.size() >= content_.size() &&
                         t.compare(t.size() - content_.size(), content_.size(), content_) == 0;
           ++i) {
        t.erase(t.size() - content_.size());
      }
    }
    return tokens;
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class DecoderSequence : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& p : parts_) tokens = p->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

}  // namespace

void unsupported(const std::string& what) {
  throw Unsupported(what + " is not supported by the C++ runner");
}

uint32_t byte_char(unsigned char b) { return byte_chars()[b]; }

void gpt2_split(const std::string& text, std::vector<std::string>& out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> at;
  unicode::decode(text, cps, at);
  const size_t n = cps.size();
  std::vector<unicode::CodeClass> cls(n);
  for (size_t i = 0; i < n; ++i) cls[i] = unicode::code_class(cps[i]);
  auto run = [&](size_t k, unicode::CodeClass c) {
    while (k < n && cls[k] == c) ++k;
    return k;
  };
  for (size_t i = 0; i < n;) {
    size_t j = 0;
    const uint32_t c = cps[i];
    if (c == '\'' && i + 1 < n) {  // 's|'t|'re|'ve|'m|'ll|'d
      const uint32_t d = cps[i + 1], e = i + 2 < n ? cps[i + 2] : 0;
      if (d == 's' || d == 't' || d == 'm' || d == 'd') {
        j = i + 2;
      } else if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) {
        j = i + 3;
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
    const size_t k = i + (c == ' ' ? 1 : 0);
    for (auto want : {unicode::kLetter, unicode::kNumber, unicode::kOther}) {
      if (!j && k < n && cls[k] == want) j = run(k, want);
    }
    if (!j) {  // \s+(?!\S) | \s+ : a white-space run leaves its last character to what follows
      j = run(i, unicode::kSpace);
      if (j < n && j - i >= 2) --j;
    }
    out.push_back(text.substr(at[i], at[j] - at[i]));
    i = j;
  }
}

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "normalizer");
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(string_pattern(j, "normalizer Replace"),
                                               j.at("content").get<std::string>());
  }
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(j.at("prepend").get<std::string>());
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& p : j.at("normalizers")) {
      if (auto n = make_normalizer(p)) parts.push_back(std::move(n));
    }
    return std::make_unique<NormalizerSequence>(std::move(parts));
  }
  refuse("normalizer", type);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "pre-tokenizer");
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(flag(j, "add_prefix_space", true),
                                                   flag(j, "use_regex", true));
  }
  if (type == "Split") {
    if (flag(j, "invert", false)) refuse("pre-tokenizer", "Split with invert");
    static const std::map<std::string, Behavior> behaviors = {
        {"Removed", Behavior::kRemoved},
        {"Isolated", Behavior::kIsolated},
        {"MergedWithPrevious", Behavior::kMergedWithPrevious},
        {"MergedWithNext", Behavior::kMergedWithNext},
        {"Contiguous", Behavior::kContiguous}};
    const std::string b = j.at("behavior").get<std::string>();
    if (!behaviors.count(b)) refuse("pre-tokenizer", "Split behavior " + b);
    return std::make_unique<SplitPreTokenizer>(string_pattern(j, "pre-tokenizer Split"),
                                               behaviors.at(b));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& p : j.at("pretokenizers")) {
      if (auto n = make_pre_tokenizer(p)) parts.push_back(std::move(n));
    }
    return std::make_unique<PreTokenizerSequence>(std::move(parts));
  }
  refuse("pre-tokenizer", type);
}

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(string_pattern(j, "decoder Replace"),
                                            j.at("content").get<std::string>());
  }
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(j.at("content").get<std::string>(),
                                          j.at("start").get<size_t>(), j.at("stop").get<size_t>());
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& p : j.at("decoders")) {
      if (auto d = make_decoder(p)) parts.push_back(std::move(d));
    }
    return std::make_unique<DecoderSequence>(std::move(parts));
  }
  refuse("decoder", type);
}

}  // namespace etspec::tokenizer
