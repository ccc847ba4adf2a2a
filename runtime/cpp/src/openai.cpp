#include "openai.h"

#include <algorithm>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace etspec {

using json = nlohmann::ordered_json;

namespace {

// The stats fields' names as strings, from the contract's list (OpenAI's usage shares two).
#define ETSPEC_FIELD_NAME(name, kind) [[maybe_unused]] constexpr const char* k_##name = #name;
namespace field {
ETSPEC_STATS_FIELDS(ETSPEC_FIELD_NAME)
}
#undef ETSPEC_FIELD_NAME

ApiError bad(const std::string& message) { return ApiError{400, message}; }

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

// Fields every request may carry that change nothing here, at their neutral values.
bool neutral(const std::string& field, const json& value) {
  if (field == "model" || field == "user") return value.is_string();
  if (field == "n") return value.is_number_integer() && value.get<int64_t>() == 1;
  if (field == "frequency_penalty" || field == "presence_penalty") {
    return value.is_number() && value.get<double>() == 0.0;
  }
  if (field == "logprobs" || field == "echo") return value.is_boolean() && !value.get<bool>();
  return false;
}

int64_t count(const json& value, const std::string& field, int64_t least) {
  const bool integer = value.is_number_integer() || value.is_number_unsigned();
  if (!integer || (value.is_number_integer() && value.get<int64_t>() < least) ||
      (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))) {
    throw bad(quoted(field) + " takes a whole number of at least " + std::to_string(least));
  }
  return value.get<int64_t>();
}

double number(const json& value, const std::string& field) {
  if (!value.is_number()) throw bad(quoted(field) + " must be a number");
  return value.get<double>();
}

}  // namespace

ApiRequest parse_request(const std::string& body, Endpoint endpoint) {
  if (body.size() > kMaxBodyBytes) {
    throw ApiError{413, "the request body is over " + std::to_string(kMaxBodyBytes >> 20) +
                            " MiB"};
  }
  json request;
  try {
    request = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string reason = e.what();
    const size_t at = reason.find("] ");
    if (at != std::string::npos) reason = reason.substr(at + 2);
    throw bad("the request body is not JSON: " + reason);
  }
  if (!request.is_object()) throw bad("the request body must be a JSON object");
  ApiRequest out;
  out.endpoint = endpoint;
  out.config.reuse_prefix = true;
  out.config.sampling.temperature = 1.0;  // the API's default
  const char* prompt_field = endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (!request.contains(prompt_field)) throw bad("the request needs " + quoted(prompt_field));
  for (const auto& [field, value] : request.items()) {
    if (field == prompt_field) {
      if (endpoint == Endpoint::kChat) {
        if (!value.is_array() || value.empty()) {
          throw bad("\"messages\" must be a non-empty list of {\"role\": ..., \"content\": ...}");
        }
        if (value.size() > kMaxMessages) {
          throw bad("at most " + std::to_string(kMaxMessages) + " messages");
        }
        out.messages = value.dump();
      } else if (value.is_string()) {
        out.prompt = Prompt(value.get<std::string>());
      } else if (value.is_array() && !value.empty() &&
                 std::all_of(value.begin(), value.end(),
                             [](const json& v) { return v.is_number_integer(); })) {
        out.prompt = Prompt(value.get<std::vector<int64_t>>());
      } else {
        throw bad("\"prompt\" must be a string or a non-empty list of token ids");
      }
    } else if (field == "max_tokens" || field == "max_completion_tokens") {
      if (!value.is_null()) out.config.max_new_tokens = count(value, field, 1);
    } else if (field == "temperature") {
      out.config.sampling.temperature = number(value, field);
    } else if (field == "top_p") {
      out.config.sampling.top_p = number(value, field);
    } else if (field == "top_k") {
      out.config.sampling.top_k = count(value, field, 0);
    } else if (field == "seed") {
      if (!value.is_null()) {
        if (!value.is_number_integer() && !value.is_number_unsigned()) {
          throw bad("\"seed\" must be an integer");
        }
        // The API's seeds are signed 64-bit; the sampler's stream takes the same bits.
        out.config.sampling.seed = value.is_number_unsigned() ? value.get<uint64_t>()
                                                              : uint64_t(value.get<int64_t>());
        out.config.sampling.seeded = true;
      }
    } else if (field == "stop") {
      if (value.is_string()) {
        out.stop = {value.get<std::string>()};
      } else if (value.is_array() && value.size() <= kMaxStops &&
                 std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); })) {
        out.stop = value.get<std::vector<std::string>>();
      } else if (!value.is_null()) {
        throw bad("\"stop\" must be a string or a list of at most " + std::to_string(kMaxStops) +
                  " strings");
      }
      for (const auto& s : out.stop) {
        if (s.empty()) throw bad("\"stop\" strings must not be empty");
      }
    } else if (field == "stream") {
      if (!value.is_boolean()) throw bad("\"stream\" must be true or false");
      out.stream = value.get<bool>();
    } else if (field == "stream_options") {
      if (!value.is_null()) {
        if (!value.is_object()) throw bad("\"stream_options\" must be an object");
        for (const auto& [k, v] : value.items()) {
          if (k != "include_usage" || !v.is_boolean()) {
            throw bad("\"stream_options\" takes include_usage (true or false) only");
          }
          out.include_usage = v.get<bool>();
        }
      }
    } else if (field == "ignore_eos") {  // an extension, as llama-server's
      if (!value.is_boolean()) throw bad("\"ignore_eos\" must be true or false");
      out.config.ignore_eos = value.get<bool>();
    } else if (!neutral(field, value)) {
      throw bad("unsupported field or value: " + quoted(field) +
                " (this server takes messages/prompt, max_tokens, temperature, top_p, top_k, "
                "seed, stop, stream, stream_options, ignore_eos)");
    }
  }
  return out;
}

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) longest_ = std::max(longest_, s.size());
}

std::string StopScanner::push(const std::string& piece) {
  if (stopped_) return "";
  const size_t from = text_.size() >= longest_ ? text_.size() - longest_ + 1 : 0;
  text_ += piece;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  // Held back: the bytes a stop string could still start in, to a character boundary.
  size_t safe = stopped_ || longest_ == 0 ? text_.size()
                : text_.size() >= longest_ - 1 ? text_.size() - (longest_ - 1) : 0;
  while (safe > sent_ && safe < text_.size() && (text_[safe] & 0xC0) == 0x80) --safe;
  if (safe <= sent_) return "";
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return out;
}

std::string StopScanner::flush() {
  std::string out = text_.substr(sent_);
  sent_ = text_.size();
  return out;
}

std::string finish_reason(const Result& result, bool stopped) {
  if (stopped) return "stop";
  return result.stop_reason == contract::kStopBudget ? "length" : "stop";
}

std::string usage_json(const Result& result) {
  const Stats& s = result.stats;
  return json({{field::k_prompt_tokens, s.prompt_tokens},
               {"completion_tokens", s.generated_tokens},
               {"total_tokens", s.prompt_tokens + s.generated_tokens},
               {"prompt_tokens_details", {{field::k_cached_tokens, s.cached_tokens}}}})
      .dump();
}

std::string stats_json(const Result& result) {
  // The ids, and every stat as `etspec_runner --json` writes them (contract STATS_FIELDS).
  return json({{"completion_ids", result.token_ids},
               {"stats", json::parse(result.stats.to_json())}})
      .dump();
}

std::string answer_json(const ApiRequest& request, const std::string& id, const std::string& model,
                        int64_t created, const Result& result, const std::string& text,
                        bool stopped) {
  const bool chat = request.endpoint == Endpoint::kChat;
  json choice = {{"index", 0}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finish_reason(result, stopped);
  return json({{"id", id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array({choice})},
               {"usage", json::parse(usage_json(result))},
               {"etspec", json::parse(stats_json(result))}})
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string chunk_json(const ApiRequest& request, const std::string& id, const std::string& model,
                       int64_t created, const std::string& delta, const std::string& finish,
                       const std::string& usage, bool first) {
  const bool chat = request.endpoint == Endpoint::kChat;
  json chunk = {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model}};
  if (!usage.empty()) {
    chunk["choices"] = json::array();
    chunk["usage"] = json::parse(usage);
  } else {
    json choice = {{"index", 0}};
    if (chat) {
      choice["delta"] = json::object();
      if (first) choice["delta"]["role"] = "assistant";
      if (finish.empty()) choice["delta"]["content"] = delta;
    } else {
      choice["text"] = finish.empty() ? delta : "";
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
    chunk["choices"] = json::array({choice});
  }
  return chunk.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_json(int status, const std::string& message) {
  const char* type = status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                     : status == 404 ? "not_found_error"
                                     : "invalid_request_error";
  return json({{"error", {{"message", message}, {"type", type}, {"code", status}}}})
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace etspec
