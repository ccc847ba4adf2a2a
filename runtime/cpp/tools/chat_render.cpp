// etspec_chat_render: the C++ chat-template renderer on its own, for tests that hold it to
// the Python runtime's (and so to transformers'). Reads a request JSON, writes the answers:
//   etspec_chat_render REQUEST.json
//   request {"stored": CHAT_TEMPLATE JSON text, "conversations": [[message...]...],
//            "add_generation_prompt": true}
//   answer  {"rendered": [text, or {"error": message}, ...]}
// A template that does not parse prints "error: ..." and exits 1, as the runner does.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "artifact.h"
#include "chat.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: etspec_chat_render REQUEST.json\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw etspec::Error(std::string(argv[1]) + ": cannot be read");
    std::stringstream s;
    s << in.rdbuf();
    const auto request = nlohmann::ordered_json::parse(s.str());
    const etspec::ChatTemplate chat(request.at("stored").get<std::string>());
    const bool generation = request.value("add_generation_prompt", true);
    auto rendered = nlohmann::ordered_json::array();
    for (const auto& conversation : request.at("conversations")) {
      try {
        rendered.push_back(chat.render(conversation.dump(), generation));
      } catch (const etspec::Error& e) {
        rendered.push_back({{"error", e.what()}});
      }
    }
    std::cout << nlohmann::ordered_json({{"rendered", rendered}}).dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
