// The OpenAI HTTP API's requests and answers over a Runner (what llama-server, vLLM and
// Ollama speak, and what the official `openai` client sends): a request body checked into a
// prompt and GenerationConfig, and the answer's JSON, whole or as server-sent-event chunks.
// The transport is server.cpp's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner.h"

namespace etspec {

// A request the server refuses: its HTTP status and one line saying why.
struct ApiError {
  int status;
  std::string message;
};

enum class Endpoint { kChat, kCompletion };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string messages;      // chat: the messages as JSON text (ChatTemplate::render)
  Prompt prompt{""};         // completion: text or ids
  GenerationConfig config;
  std::vector<std::string> stop;  // at most kMaxStops strings, none empty
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
};

// Bounds a request is held to (a server answers 4xx past them).
inline constexpr size_t kMaxBodyBytes = 8u << 20;
inline constexpr size_t kMaxMessages = 1024;
inline constexpr size_t kMaxStops = 4;

// `body` checked against the endpoint's fields (unknown fields, wrong kinds, values out of
// range: ApiError 400). Sampling defaults are the API's (temperature 1, top_p 1); the
// conversation cache is always reused.
ApiRequest parse_request(const std::string& body, Endpoint endpoint);

// Text generated so far, cut at the first stop string: what may be sent now (never a stop
// string's prefix that later text could complete) and whether a stop string was reached.
class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops);
  // Takes the next piece; returns the text now safe to send.
  std::string push(const std::string& piece);
  // The rest, at the end of generation.
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything kept (no stop string)

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0, sent_ = 0;
  std::string text_;
  bool stopped_ = false;
};

// The answer's parts.
std::string finish_reason(const Result& result, bool stopped);
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"} as JSON.
std::string usage_json(const Result& result);
// etspec's own fields: acceptance, tokens per verify call, the drafters' steps, the ids.
std::string stats_json(const Result& result);

// A whole answer (chat.completion or text_completion).
std::string answer_json(const ApiRequest& request, const std::string& id, const std::string& model,
                        int64_t created, const Result& result, const std::string& text,
                        bool stopped);
// One streamed chunk's JSON: `delta` text, or the finish (finish non-empty), or the usage
// (usage non-empty: no choices).
std::string chunk_json(const ApiRequest& request, const std::string& id, const std::string& model,
                       int64_t created, const std::string& delta, const std::string& finish,
                       const std::string& usage, bool first);
// An error answer's JSON ({"error": {"message", "type", "code"}}).
std::string error_json(int status, const std::string& message);

}  // namespace etspec
