// etspec_runner: run an etspec .pte pair without Python; a thin CLI over the library
// (runner.h), with `etspec generate`'s options.
//
//   etspec_runner --target T.pte [--draft D.pte] (--prompt TEXT | --prompt-file PATH |
//       --prompt-ids 1,2,3) [--tree auto] [--temperature 0.8] ...
//
// The run settings (--tree and its knobs, --draft-method and its options, --kv, sampling)
// are the rows of contract::kRunSettings, generated from etspec/contract.py's RUN_SETTINGS:
// parsed, checked and listed by --help from that table (apply_settings below).
//
// Streams the generated text to stdout as it completes (ids with --print-ids, or when the
// target carries no tokenizer this runtime reads), then a summary line on stderr; with
// --json prints one object per generation instead: token_ids, text, stop_reason and stats
// with the Python runtime's field names. --num-samples N generates N times from the same
// prompt, independent samples: one random stream, or with --seed S sample i seeded S + i
// (the same N every run).
// --serve answers JSON requests from stdin on one load (serve_requests below).
// A user error prints "error: ..." on one line and exits 1 (2 for bad arguments).
#include <csignal>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <cstdio>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "logs.h"
#include "runner.h"
#include "sampler.h"
#include "speculative/settings.h"

namespace {

struct UsageError : etspec::Error {
  using etspec::Error::Error;
};

// One line: the command's own options, then every run setting (contract::kRunSettings).
std::string usage() {
  std::string line =
      "usage: etspec_runner --target T.pte [--draft D.pte] "
      "(--prompt TEXT | --prompt-file PATH | --prompt-ids 1,2,3) [--max-new-tokens N] "
      "[--num-samples N] [--ignore-eos] [--print-ids] [--json] [--serve] [--verbose]";
  for (const auto& row : etspec::contract::kRunSettings) {
    std::string value = *row.choices ? row.choices : "N";
    std::replace(value.begin(), value.end(), ',', '|');
    const std::string kind = row.kind;
    if (kind == "text") value = "SPEC";
    if (kind == "method") value = "METHOD";
    line += std::string(" [") + row.flag + (kind == "flag" ? "" : " " + value) + "]";
  }
  return line;
}

// --help only: error lines carry usage(), which must stay one line.
const char* kHelpNotes =
    "--tree defaults to auto (the dispatcher: chains and trees chosen by measured cost and "
    "observed acceptance), as in `etspec generate`.\n"
    "Aliases from other runtimes (vLLM, SGLang, llama.cpp) are accepted as in `etspec "
    "generate`, e.g. --num-speculative-tokens for --num-spec-tokens.";

// Our option name for a name users bring from another runtime (etspec/contract.py's
// OPTION_ALIASES, through the generated header); other names are returned unchanged.
std::string canonical(const std::string& name) {
  for (const auto& [alias, ours] : etspec::contract::kOptionAliases) {
    if (name == alias) return ours;
  }
  return name;
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    size_t used = 0;
    try {
      ids.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos) {
      throw UsageError("--prompt-ids takes comma-separated integers, got '" + text + "'");
    }
  }
  return ids;
}

template <typename T>
T number(const std::string& flag, const std::string& value) {
  std::istringstream in(value);
  T out{};
  in >> out;
  // istream reads "-1" into an unsigned type as its maximum: a negative seed is refused, as
  // Python refuses it, rather than silently becoming 2^64 - 1.
  const bool negative = std::is_unsigned_v<T> && value.find('-') != std::string::npos;
  if (in.fail() || !in.eof() || negative) {
    throw UsageError(flag + " takes a number, got '" + value + "'");
  }
  return out;
}

// Like Python's float(): "nan" and "inf" parse, so the range checks that follow give the
// same message as the Python runtime rather than a parse error.
template <>
double number<double>(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double out = value.empty() ? 0.0 : std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size()) {
    throw UsageError(flag + " takes a number, got '" + value + "'");
  }
  return out;
}

std::string ids_json(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string read_prompt_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw etspec::Error(etspec::message("prompt_file_unreadable",
                                        {{"path", path}, {"reason", std::strerror(EISDIR)}}));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw etspec::Error(etspec::message("prompt_file_unreadable",
                                        {{"path", path}, {"reason", std::strerror(errno)}}));
  }
  // Read at most one byte past the limit: /dev/zero or a stray binary must not fill memory.
  std::string text(etspec::contract::kPromptFileMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<long>(text.size()) > etspec::contract::kPromptFileMaxBytes) {
    throw etspec::Error(etspec::message(
        "prompt_file_too_large",
        {{"path", path}, {"limit", std::to_string(etspec::contract::kPromptFileMaxBytes >> 20)}}));
  }
  if (const auto bad = etspec::invalid_utf8_at(text)) {
    char byte[3];
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(text[*bad]));
    throw etspec::Error(etspec::message(
        "prompt_file_not_utf8", {{"path", path}, {"byte", byte}, {"offset", std::to_string(*bad)}}));
  }
  return text;
}

void report(const etspec::Result& result, bool json);
std::string result_json(const etspec::Result& result);

// --serve: one JSON request per stdin line, one JSON line back per request, all on one
// load (and one --tree auto dispatcher, which keeps learning across requests, as a Python
// runner does). A request: {"prompt": TEXT}, {"prompt_ids": [...]} or {"messages": [...]}
// (rendered by the target's chat template), and optionally
// max_new_tokens, temperature, top_k, top_p, seed, ignore_eos (the command line's values
// otherwise), reuse_prefix (prefill only what follows what the KV cache holds of it). A
// request the runner refuses answers {"error": "..."}; serving goes on.
// One line of stdin, at most `limit` bytes kept: a longer line is consumed to its end (never
// held whole: stdin may be /dev/zero) and flagged. False at the end of input.
bool read_request_line(std::istream& in, std::string& line, size_t limit, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (int ch = buf->sbumpc(); ch != std::char_traits<char>::eof(); ch = buf->sbumpc()) {
    any = true;
    if (ch == '\n') return true;
    if (line.size() < limit) {
      line.push_back(static_cast<char>(ch));
    } else {
      too_long = true;
    }
  }
  return any;
}

// A request value or name as an error quotes it: JSON text cut to kQuoteMax characters.
std::string quote(const std::string& text) {
  const size_t max = etspec::contract::kQuoteMax;
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

// An array or object is named, not printed: printing recurses, and a line may nest 8 MiB deep.
std::string quote(const nlohmann::json& value) {
  if (value.is_structured()) return std::string("a JSON ") + value.type_name();
  return quote(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Whether `value` is what contract::kServeKinds' `kind` names. Booleans are never numbers,
// and no number is converted (1.5 is not a count, -1 not a seed).
bool holds(const nlohmann::json& value, const std::string& kind) {
  const auto integer = [](const nlohmann::json& v) {
    return v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT64_MAX)
                                  : v.is_number_integer();
  };
  if (kind == "text") return value.is_string();
  if (kind == "ids") {
    if (!value.is_array()) return false;
    for (const auto& id : value) {
      if (!integer(id)) return false;
    }
    return true;
  }
  if (kind == "count") return integer(value) && value.get<int64_t>() >= 1;
  if (kind == "natural") return integer(value) && value.get<int64_t>() >= 0;
  if (kind == "number") return value.is_number();
  if (kind == "flag") return value.is_boolean();
  if (kind == "seed") return value.is_null() || value.is_number_unsigned();
  if (kind == "messages") return value.is_array();  // each message: ChatTemplate::render
  throw std::logic_error("unknown request kind " + kind);
}

// The request checked against contract::kServeRequest: an object, only known fields, each
// of its kind, exactly one prompt. Throws Error with the contract's message.
void check_request(const nlohmann::json& request) {
  namespace contract = etspec::contract;
  if (!request.is_object()) {
    throw etspec::Error(etspec::message("serve_not_object", {{"value", quote(request)}}));
  }
  for (const auto& [field, value] : request.items()) {
    const char* kind = nullptr;
    for (const auto& [name, k] : contract::kServeRequest) {
      if (field == name) kind = k;
    }
    if (kind == nullptr) {
      std::string fields;
      for (const auto& [name, k] : contract::kServeRequest) fields += (fields.empty() ? "" : ", ") + std::string(name);
      throw etspec::Error(etspec::message(
          "serve_unknown_field", {{"field", quote(field)}, {"fields", fields}}));
    }
    if (!holds(value, kind)) {
      std::string wording;
      for (const auto& [k, w] : contract::kServeKinds) {
        if (std::string(kind) == k) wording = w;
      }
      throw etspec::Error(etspec::message(
          "serve_field_kind", {{"field", field}, {"kind", wording}, {"value", quote(value)}}));
    }
  }
  const int prompts = request.contains(contract::kServePrompt) +
                      request.contains(contract::kServePromptIds) +
                      request.contains(contract::kServeMessages);
  if (prompts != 1) throw etspec::Error(etspec::message("serve_one_prompt", {}));
}

int serve_requests(etspec::Runner& runner, const etspec::GenerationConfig& defaults) {
  namespace contract = etspec::contract;
  const auto as_json = [](const nlohmann::json& j) {
    // A message may quote the request's own bytes, which need not be UTF-8.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string line;
  bool too_long = false;
  while (read_request_line(std::cin, line, contract::kPromptFileMaxBytes, too_long)) {
    if (too_long) {
      const std::string limit = std::to_string(contract::kPromptFileMaxBytes >> 20);
      std::cout << as_json({{contract::kServeError,
                             etspec::message("request_too_long", {{"limit", limit}})}})
                << "\n" << std::flush;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string answer;
    try {
      nlohmann::json request;
      try {
        request = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        // Its what() leads with "[json.exception.parse_error.101] parse error at line 1, ".
        std::string reason = e.what();
        const size_t at = reason.find("] ");
        if (at != std::string::npos) reason = reason.substr(at + 2);
        throw etspec::Error(etspec::message("serve_not_json", {{"reason", reason}}));
      }
      check_request(request);
      etspec::GenerationConfig config = defaults;
      config.sampler = nullptr;  // each request its own stream (seeded: reproducible)
      config.max_new_tokens = request.value(contract::kServeMaxNewTokens, config.max_new_tokens);
      config.ignore_eos = request.value(contract::kServeIgnoreEos, config.ignore_eos);
      config.reuse_prefix = request.value(contract::kServeReusePrefix, false);
      auto& s = config.sampling;
      s.temperature = request.value(contract::kServeTemperature, s.temperature);
      s.top_k = request.value(contract::kServeTopK, s.top_k);
      s.top_p = request.value(contract::kServeTopP, s.top_p);
      if (request.contains(contract::kServeSeed) && !request[contract::kServeSeed].is_null()) {
        s.seed = request[contract::kServeSeed].get<uint64_t>();
        s.seeded = true;
      }
      const etspec::Prompt prompt =
          request.contains(contract::kServePrompt)
              ? etspec::Prompt(request[contract::kServePrompt].get<std::string>())
          : request.contains(contract::kServeMessages)
              ? etspec::Prompt(runner.chat_ids(as_json(request[contract::kServeMessages])))
              : etspec::Prompt(request.at(contract::kServePromptIds).get<std::vector<int64_t>>());
      answer = result_json(runner.generate(prompt, config));
      const std::string report = runner.policy_report();
      if (!report.empty()) {  // what --tree auto measured, for the benchmark's records
        answer.pop_back();
        answer += ", \"" + std::string(contract::kServePolicyReport) + "\": " + report + "}";
      }
    } catch (const std::exception& e) {
      answer = as_json({{contract::kServeError, e.what()}});
    }
    std::cout << answer << "\n" << std::flush;
  }
  return 0;
}

// Each contract::kRunSettings value given, into the options it sets (by its field name).
void apply_settings(std::map<std::string, std::string>& opt, etspec::LoadOptions& load,
                    etspec::SamplingConfig& sampling) {
  const auto count = [&](const char* flag) { return number<int64_t>(flag, opt[flag]); };
  const std::map<std::string, std::function<void(const char*)>> fields = {
      {"spec.draft_method", [&](const char* f) { load.draft_method = opt[f]; }},
      {"spec.kv_strategy", [&](const char* f) { load.kv_strategy = opt[f]; }},
      {"spec.weight_cache", [&](const char*) { load.weight_cache = false; }},
      {"tree.mode", [&](const char* f) { load.tree.mode = opt[f]; }},
      {"tree.num_spec_tokens", [&](const char* f) { load.tree.num_spec_tokens = count(f); }},
      {"tree.static_tree", [&](const char* f) { load.tree.static_tree = opt[f]; }},
      {"tree.depth", [&](const char* f) { load.tree.depth = count(f); }},
      {"tree.num_steps", [&](const char* f) { load.tree.num_steps = count(f); }},
      {"tree.topk", [&](const char* f) { load.tree.topk = count(f); }},
      {"tree.total_tokens", [&](const char* f) { load.tree.total_tokens = count(f); }},
      {"sampling.temperature",
       [&](const char* f) { sampling.temperature = number<double>(f, opt[f]); }},
      {"sampling.top_k", [&](const char* f) { sampling.top_k = count(f); }},
      {"sampling.top_p", [&](const char* f) { sampling.top_p = number<double>(f, opt[f]); }},
      {"sampling.seed",
       [&](const char* f) {
         sampling.seed = number<uint64_t>(f, opt[f]);
         sampling.seeded = true;
       }},
  };
  for (const auto& row : etspec::contract::kRunSettings) {
    if (!opt.count(row.flag)) continue;
    const std::string field = row.field;
    if (field.rfind("method.", 0) == 0) {  // a draft method's own option: by its name
      load.draft.values[field.substr(7)] = count(row.flag);
    } else {
      fields.at(field)(row.flag);
    }
  }
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> opt;
  bool json = false, print_ids = false, serve = false;
  etspec::GenerationConfig config;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--verbose") {
      etspec::set_executorch_logs(true);
    } else if (a == "--ignore-eos") {
      config.ignore_eos = true;
    } else if (a == "--print-ids") {
      print_ids = true;
    } else if (a == "--serve") {
      serve = true;
    } else if (const auto* row = etspec::run_setting(canonical(a));
               row != nullptr && std::string(row->kind) == "flag") {
      opt[row->flag] = "";  // a flag setting (--no-weight-cache): present, no value
    } else if (a == "-h" || a == "--help") {
      std::cout << usage() << "\n" << kHelpNotes << "\n";
      return 0;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      opt[canonical(a)] = argv[++i];
    } else {
      throw UsageError("unexpected argument '" + a + "'; " + usage());
    }
  }
  // Options of this command line only; every run setting is a contract::kRunSettings row.
  static const char* command_options[] = {"--target",     "--draft",          "--prompt",
                                          "--prompt-file", "--prompt-ids", "--max-new-tokens",
                                          "--num-samples"};
  for (const auto& [k, v] : opt) {
    bool ok = etspec::run_setting(k) != nullptr;
    for (const char* n : command_options) ok = ok || k == n;
    if (!ok) throw UsageError("unknown option " + k + "; " + usage());
  }
  if (!opt.count("--target")) throw UsageError(std::string("--target is required; ") + usage());
  const int prompts = opt.count("--prompt") + opt.count("--prompt-file") + opt.count("--prompt-ids");
  if (serve && prompts) {
    throw UsageError("--serve reads its prompts from stdin; drop --prompt/--prompt-file/--prompt-ids");
  }
  if (!serve && prompts != 1) {
    throw UsageError(etspec::message(
        "one_prompt", {{"choices", "--prompt TEXT, --prompt-ids 1,2,3 or --prompt-file PATH"}}));
  }
  // Every option is parsed and checked before anything loads.
  std::optional<etspec::Prompt> prompt;
  if (opt.count("--prompt-ids")) {
    prompt.emplace(parse_ids(opt["--prompt-ids"]));
  } else if (opt.count("--prompt")) {
    etspec::check_prompt_utf8(opt["--prompt"]);  // exit 1, as `etspec generate`
    prompt.emplace(opt["--prompt"]);
  }
  if (opt.count("--max-new-tokens")) {
    config.max_new_tokens = number<int64_t>("--max-new-tokens", opt["--max-new-tokens"]);
    if (config.max_new_tokens < 1) {
      throw UsageError(etspec::message("max_new_tokens_low", {{"value", opt["--max-new-tokens"]}}));
    }
  }
  etspec::LoadOptions load;
  auto& sampling = config.sampling;
  apply_settings(opt, load, sampling);
  // Each setting's minimum and owner (a --tree mode, a draft method) are checked as a
  // library caller's are, with the Python runtime's words, before anything loads.
  try {
    load.tree.check();  // first: its own order of checks (--depth with --num-steps first)
    for (const auto& row : etspec::contract::kRunSettings) {
      if (opt.count(row.flag) && std::string(row.kind) == "int") {
        etspec::check_minimum(row.flag, number<int64_t>(row.flag, opt[row.flag]));
      }
    }
    for (const auto& [flag, value] : opt) {
      etspec::check_owner(flag, true, load.tree.mode, load.draft_method);
    }
  } catch (const UsageError&) {
    throw;
  } catch (const etspec::Error& e) {
    throw UsageError(e.what());  // a refused option is a usage error, as in `etspec generate`
  }
  load.check(opt.count("--draft") > 0);
  etspec::Sampler sampler(sampling);  // checks the settings before anything loads
  config.sampler = &sampler;  // --num-samples, unseeded: one random stream across the samples
  int64_t samples = 1;
  if (opt.count("--num-samples")) {
    samples = number<int64_t>("--num-samples", opt["--num-samples"]);
  }
  if (samples < 1) {
    throw UsageError(etspec::message("setting_minimum", {{"option", "--num-samples"},
                                                         {"minimum", "1"},
                                                         {"value", opt["--num-samples"]}}));
  }
  if (opt.count("--prompt-file")) prompt.emplace(read_prompt_file(opt["--prompt-file"]));

  auto runner = etspec::Runner::load(opt["--target"], opt.count("--draft") ? opt["--draft"] : "",
                                     load);
  if (serve) return serve_requests(*runner, config);
  const bool text = runner->tokenizer() && !print_ids;
  etspec::TextCallback on_text;
  etspec::TokenCallback on_tokens;
  if (!json && text) {
    on_text = [](const std::string& piece) { std::cout << piece << std::flush; };
  } else if (!json) {
    on_tokens = [](const std::vector<int64_t>& ids, const std::string&) {
      for (int64_t id : ids) std::cout << id << " ";
      std::cout << std::flush;
      return true;
    };
  }
  const auto ids = runner->encode(*prompt);  // once, not per sample
  const uint64_t seed = sampling.seed;
  for (int64_t i = 0; i < samples; ++i) {
    if (sampling.seeded) {
      // A seeded request samples by coupling (sampler.h): the seed fixes every token, so
      // sample i is seeded seed + i (independent samples, the same N on every run).
      sampling.seed = seed + static_cast<uint64_t>(i);
      config.sampler = nullptr;
    }
    report(runner->generate(ids, config, on_text, nullptr, on_tokens), json);
  }
  return 0;
}

std::string result_json(const etspec::Result& result) {
  return "{\"token_ids\": " + ids_json(result.token_ids) +
         ", \"text\": " + nlohmann::json(result.text).dump() + ", \"stop_reason\": \"" +
         result.stop_reason + "\", \"stats\": " + result.stats.to_json() + "}";
}

void report(const etspec::Result& result, bool json) {
  if (json) {
    std::cout << result_json(result) << "\n";
  } else {
    // The text went out before its stats line: a stdout that refused it is the one error
    // line, with no stats line above it.
    std::cout << "\n" << std::flush;
    if (!std::cout) throw etspec::Error(etspec::message("stdout_failed", {}));
    std::cerr << "[" << result.stats.generated_tokens << " tokens, " << result.stop_reason;
    if (result.stats.verify_calls) {
      std::cerr << ", TPC "
                << 1.0 + double(result.stats.accepted_tokens) / result.stats.verify_calls;
    }
    std::cerr << "]\n";
  }
}

}  // namespace

// A message quoting user input (a newline in --prompt-ids, say) still prints as one line.
static std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

int main(int argc, char** argv) {
  // A closed pipe or a full disk on stdout is an error the user sees (contract
  // "stdout_failed", exit 1), not a silent exit 0 or a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const int rc = run(argc, argv);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "error: " << etspec::message("stdout_failed", {}) << "\n";
      return 1;
    }
    return rc;
  } catch (const UsageError& e) {
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return 2;
  } catch (const etspec::Error& e) {
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return 1;
  }
}
