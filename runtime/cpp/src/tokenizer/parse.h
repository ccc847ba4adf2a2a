// What the tokenizer's parts share when reading their tokenizer.json entries (internal to
// runtime/cpp/src/tokenizer/).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "components.h"

namespace etspec::tokenizer::parse {

using nlohmann::json;

inline std::string type_of(const json& j, const char* stage) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Unsupported(std::string(stage) + " without a type");
  }
  return j["type"].get<std::string>();
}

[[noreturn]] inline void refuse(const char* stage, const std::string& what) {
  tokenizer::unsupported(std::string(stage) + " " + what);
}

// A pattern given as {"String": "..."}; regex patterns need an engine this build lacks.
inline std::string string_pattern(const json& j, const char* stage) {
  const json& p = j.at("pattern");
  if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    return p["String"].get<std::string>();
  }
  refuse(stage, "with a Regex pattern");
}

inline void replace_all(std::string& s, const std::string& from, const std::string& to) {
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
inline bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}


}  // namespace etspec::tokenizer::parse
