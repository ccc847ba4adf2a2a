// runtime/chat.py: a conversation (`messages`) as the text an instruct model was trained on,
// rendered by the checkpoint's chat template stored in the target (contract CHAT_TEMPLATE)
// with minja (vendored; the Jinja subset chat templates use, as llama.cpp renders them),
// under transformers' settings: blocks trimmed, the special tokens, raise_exception,
// strftime_now and `{% generation %}` in scope, and no polyfills (the template's own text).
#pragma once

#include <map>
#include <memory>
#include <string>

namespace minja {
class TemplateNode;
}

namespace etspec {

class ChatTemplate {
 public:
  // The artifact's chat_template constant (UTF-8 JSON: template and special tokens).
  // Throws Error for one that does not read or does not parse, naming why.
  explicit ChatTemplate(const std::string& stored);
  // `messages` (JSON text: a non-empty list of {"role": text, "content": text or parts}
  // objects, checked as runtime/chat.py's check_messages) up to the assistant's turn when
  // `add_generation_prompt`. Throws Error, one line, for bad messages or when the template
  // refuses them.
  std::string render(const std::string& messages, bool add_generation_prompt = true) const;

 private:
  std::shared_ptr<minja::TemplateNode> root_;
  std::map<std::string, std::string> special_;
};

}  // namespace etspec
