// tokenizers' decoders: ByteLevel, ByteFallback, Replace, Fuse, Strip, Sequence.
#include "components.h"

#include <cctype>
#include <map>

#include "unicode.h"
#include "parse.h"

namespace etspec::tokenizer {
namespace {

using namespace parse;  // the tokenizer.json readers every part shares

class ByteLevelDecoder : public Decoder {
 public:
  ByteLevelDecoder() {
    for (int b = 0; b < 256; ++b) bytes_[byte_char(static_cast<unsigned char>(b))] = static_cast<unsigned char>(b);
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

}  // namespace

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
