#include "chat.h"

#include <chrono>
#include <ctime>
#include <iomanip>
#include <sstream>

#include <minja/minja.hpp>
#include <nlohmann/json.hpp>

#include "artifact.h"

namespace etspec {

using json = nlohmann::ordered_json;

namespace {

// The special tokens a template may name, as tokenizer_config.json spells them.
constexpr const char* kSpecialNames[] = {"bos_token", "eos_token", "unk_token", "pad_token"};

void check_messages(const json& messages);

// minja's message without the template excerpt it appends (" at row R, column C:\n...").
std::string first_line(const std::exception& e) {
  std::string why = e.what();
  why = why.substr(0, why.find('\n'));
  const size_t at = why.rfind(" at row ");
  return at == std::string::npos ? why : why.substr(0, at);
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& stored) {
  json entry;
  try {
    entry = json::parse(stored);
  } catch (const json::exception& e) {
    throw Error(message("chat_template_unreadable", {{"reason", e.what()}}));
  }
  if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) {
    throw Error(message("chat_template_not_text", {}));
  }
  for (const char* name : kSpecialNames) {
    if (entry.contains(name) && entry[name].is_string()) special_[name] = entry[name];
  }
  try {
    root_ = minja::Parser::parse(entry["template"].get<std::string>(),
                                 {/* trim_blocks */ true, /* lstrip_blocks */ true,
                                  /* keep_trailing_newline */ false});
  } catch (const std::exception& e) {
    throw Error(message("chat_template_syntax", {{"reason", first_line(e)}}));
  }
}

std::string ChatTemplate::render(const std::string& text, bool add_generation_prompt) const {
  json messages;
  try {
    messages = json::parse(text);
  } catch (const json::exception&) {
    messages = nullptr;  // refused below, in check_messages' words
  }
  check_messages(messages);
  auto context = minja::Context::make(json({
      {"messages", messages},
      {"add_generation_prompt", add_generation_prompt},
  }));
  context->set("tools", minja::Value());
  context->set("documents", minja::Value());
  for (const auto& [name, value] : special_) context->set(name, value);
  context->set("strftime_now",
               minja::Value::callable([](const std::shared_ptr<minja::Context>&,
                                         minja::ArgumentsValue& args) {
                 args.expectArgs("strftime_now", {1, 1}, {0, 0});
                 const std::time_t now =
                     std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
                 std::tm local{};
                 localtime_r(&now, &local);
                 std::ostringstream out;
                 out << std::put_time(&local, args.args[0].get<std::string>().c_str());
                 return minja::Value(out.str());
               }));
  try {
    return root_->render(context);
  } catch (const std::exception& e) {  // raise_exception(...) in the template, or misuse
    throw Error(message("chat_template_refused", {{"reason", first_line(e)}}));
  }
}

namespace {

void check_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    throw Error(message("messages_not_list", {}));
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw Error(message("message_no_role", {{"index", std::to_string(i)}}));
    }
    if (m.contains("content")) {
      const json& c = m["content"];
      if (!c.is_null() && !c.is_string() && !c.is_array()) {
        throw Error(message("message_bad_content",
                            {{"index", std::to_string(i)}, {"kind", c.type_name()}}));
      }
    }
  }
}

}  // namespace

}  // namespace etspec
