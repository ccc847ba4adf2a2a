// tokenizers' normalizers: Replace (a string), Prepend, Sequence.
#include "components.h"

#include "parse.h"

namespace etspec::tokenizer {
namespace {

using namespace parse;  // the tokenizer.json readers every part shares

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

}  // namespace

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

}  // namespace etspec::tokenizer
