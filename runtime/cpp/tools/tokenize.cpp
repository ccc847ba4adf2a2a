// etspec_tokenize: the C++ tokenizer on its own, for tests that hold it to the Python
// runtime's. Reads a request JSON and writes the answers as JSON:
//   etspec_tokenize TOKENIZER.json REQUEST.json
//   request {"encode": [text...], "decode": [[id...]...], "stream": [[[id...] per push]...]}
//   answer  {"encode": [[id...]...], "decode": [text...], "stream": [[piece..., flushed]...]}
// An unreadable tokenizer or text prints "error: ..." and exits 1, as the runner does.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "artifact.h"
#include "tokenizer.h"

namespace {

std::string read(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw etspec::Error(std::string(path) + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: etspec_tokenize TOKENIZER.json REQUEST.json\n";
    return 2;
  }
  try {
    const etspec::Tokenizer tok(read(argv[1]));
    const auto request = nlohmann::json::parse(read(argv[2]));
    nlohmann::json answer = {{"encode", nlohmann::json::array()},
                             {"decode", nlohmann::json::array()},
                             {"stream", nlohmann::json::array()}};
    for (const auto& text : request.value("encode", nlohmann::json::array())) {
      answer["encode"].push_back(tok.encode(text.get<std::string>()));
    }
    for (const auto& ids : request.value("decode", nlohmann::json::array())) {
      answer["decode"].push_back(tok.decode(ids.get<std::vector<int64_t>>()));
    }
    for (const auto& pushes : request.value("stream", nlohmann::json::array())) {
      etspec::StreamDecoder stream(tok);
      auto pieces = nlohmann::json::array();
      for (const auto& ids : pushes) pieces.push_back(stream.push(ids.get<std::vector<int64_t>>()));
      pieces.push_back(stream.flush());
      answer["stream"].push_back(pieces);
    }
    // Decoded text may hold U+FFFD but is always valid UTF-8; encode it as such.
    std::cout << answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
