// tokenizers' pre-tokenizers: ByteLevel (GPT-2's split and byte alphabet), Split on a string, Sequence.
#include "components.h"

#include <algorithm>
#include <array>
#include <map>

#include "unicode.h"
#include "parse.h"

namespace etspec::tokenizer {
namespace {

using namespace parse;  // the tokenizer.json readers every part shares

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

}  // namespace

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

}  // namespace etspec::tokenizer
