// etspec_runner: run an etspec .pte pair without Python.
//
//   etspec_runner --target T.pte [--draft D.pte | --draft-method gemma4-assistant |
//       --draft-method prompt-lookup [--min-ngram 1] [--max-ngram 3]] [--draft-window N]
//       --prompt-ids 1,2,3 [--max-new-tokens 128]
//       [--tree chain|static|dynamic] [--num-spec-tokens 3] [--static-tree N8|D3xBF2|JSON]
//       [--depth N | --num-steps N] [--draft-topk K] [--total-tokens T]
//       (--tree defaults to chain here: the Python runtime's default, auto, is not ported yet)
//       [--kv position-overwrite|scratch-commit]
//       [--temperature 0] [--top-k 0] [--top-p 1] [--seed N] [--num-samples 1]
//       [--ignore-eos] [--no-weight-cache] [--json] [--verbose]
//
// Streams the generated ids to stdout as they are produced (one line per generation), or
// with --json prints one object per generation: token_ids, stop_reason and stats with the
// Python runtime's field names. --num-samples N generates N times from the same prompt with
// one random stream (independent samples; with --seed, the same N samples every run).
// A user error prints "error: ..." on one line and exits 1 (2 for bad arguments).
#include <cmath>
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
#include <vector>

#include <executorch/runtime/platform/platform.h>

#include "program.h"
#include "runner.h"
#include "sampler.h"
#include "speculative/eagle3.h"
#include "speculative/gemma4_assistant.h"
#include "speculative/dynamic_tree.h"
#include "speculative/generator.h"
#include "speculative/prompt_lookup.h"
#include "speculative/static_tree.h"

namespace {
bool g_verbose = false;  // --verbose: let ExecuTorch's own log lines through
}  // namespace

// ExecuTorch logs load failures and CPU probes on stderr itself (some of it not even UTF-8
// for a damaged file), which would bury the runner's one-line error: this definition
// replaces the runtime's weak default and drops them unless --verbose.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level,
                                        const char* filename, const char*, size_t line,
                                        const char* message, size_t length) {
  if (!g_verbose) return;
  std::fprintf(stderr, "%c executorch %s:%zu] %.*s\n", static_cast<char>(level), filename,
               line, static_cast<int>(length), message);
}

namespace {

struct UsageError : etspec::Error {
  using etspec::Error::Error;
};

const char* kUsage =
    "usage: etspec_runner --target T.pte [--draft D.pte | --draft-method gemma4-assistant | "
    "--draft-method prompt-lookup [--min-ngram N] [--max-ngram N]] [--draft-window N] "
    "--prompt-ids 1,2,3 "
    "[--max-new-tokens N] [--tree chain|static|dynamic] [--num-spec-tokens N] "
    "[--static-tree SPEC] [--depth N] [--draft-topk K] [--total-tokens T] "
    "[--kv position-overwrite|scratch-commit] [--temperature T] [--top-k K] [--top-p P] "
    "[--seed N] [--num-samples N] [--ignore-eos] [--no-weight-cache] [--json] [--verbose]";

// --help only: error lines carry kUsage, which must stay one line.
const char* kHelpNotes =
    "--tree defaults to chain (of --num-spec-tokens 3) in this runner: `etspec generate` "
    "defaults to auto, which the C++ runner does not have yet.\n"
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
  if (in.fail() || !in.eof()) throw UsageError(flag + " takes a number, got '" + value + "'");
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

void report(const etspec::Result& result, bool json);

int run(int argc, char** argv) {
  std::map<std::string, std::string> opt;
  bool json = false;
  // As in Python: on unless --no-weight-cache or ETSPEC_XNNPACK_WEIGHT_CACHE=0/false/off/no.
  bool weight_cache = true;
  if (const char* env = std::getenv(etspec::contract::kWeightCacheEnv)) {
    std::string v(env);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    weight_cache = !(v == "0" || v == "false" || v == "off" || v == "no");
  }
  etspec::GenerateOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--verbose") {
      g_verbose = true;
    } else if (a == "--ignore-eos") {
      options.ignore_eos = true;
    } else if (a == "--no-weight-cache") {
      weight_cache = false;
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage << "\n" << kHelpNotes << "\n";
      return 0;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      opt[canonical(a)] = argv[++i];
    } else {
      throw UsageError("unexpected argument '" + a + "'; " + kUsage);
    }
  }
  static const char* known[] = {"--target", "--draft", "--draft-method", "--prompt-ids", "--max-new-tokens",
                                "--tree", "--num-spec-tokens", "--static-tree", "--kv", "--temperature",
                                "--top-k", "--top-p", "--seed", "--num-samples", "--min-ngram",
                                "--max-ngram", "--draft-window", "--depth", "--num-steps",
                                "--draft-topk", "--total-tokens"};
  for (const auto& [k, v] : opt) {
    bool ok = false;
    for (const char* n : known) ok = ok || k == n;
    if (!ok) throw UsageError("unknown option " + k + "; " + kUsage);
  }
  if (!opt.count("--target")) throw UsageError(std::string("--target is required; ") + kUsage);
  if (!opt.count("--prompt-ids")) {
    throw UsageError(
        "--prompt-ids is required (this runner takes token ids; `etspec generate "
        "--json` prints the ids of a text prompt)");
  }
  const auto prompt = parse_ids(opt["--prompt-ids"]);
  if (opt.count("--max-new-tokens")) {
    options.max_new_tokens = number<int64_t>("--max-new-tokens", opt["--max-new-tokens"]);
  }
  namespace contract = etspec::contract;
  const std::string method =
      opt.count("--draft-method") ? opt["--draft-method"] : contract::kEagle3;
  const bool assistant = method == contract::kGemma4AssistantMethod;
  const bool lookup = method == contract::kPromptLookupMethod;
  if (method != contract::kEagle3 && !assistant && !lookup) {
    throw UsageError(etspec::message(
        "unknown_choice", {{"what", "--draft-method"},
                           {"value", method},
                           {"choices", std::string(contract::kEagle3) + ", " +
                                           contract::kGemma4AssistantMethod + ", " +
                                           contract::kPromptLookupMethod}}));
  }
  if (assistant && opt.count("--draft")) {
    throw UsageError(etspec::message("assistant_with_draft", {}));
  }
  if (lookup && opt.count("--draft")) {
    throw UsageError(etspec::message("lookup_with_draft", {}));
  }
  // Prompt lookup's n-gram range: as `etspec generate`'s defaults (contract.DEFAULT_MAX_NGRAM).
  const int64_t min_ngram =
      opt.count("--min-ngram") ? number<int64_t>("--min-ngram", opt["--min-ngram"]) : 1;
  const int64_t max_ngram = opt.count("--max-ngram")
                                ? number<int64_t>("--max-ngram", opt["--max-ngram"])
                                : std::max<int64_t>(contract::kDefaultMaxNgram, min_ngram);
  if ((opt.count("--min-ngram") || opt.count("--max-ngram")) && !lookup) {
    throw UsageError("--min-ngram/--max-ngram apply to --draft-method prompt-lookup");
  }
  const bool speculative = opt.count("--draft") > 0 || assistant || lookup;
  // --draft-window N: the EAGLE-3 draft attends to its last N positions only (an ablation).
  int64_t window = 0;
  if (opt.count("--draft-window")) {
    window = number<int64_t>("--draft-window", opt["--draft-window"]);
    if (window < 1) {
      throw UsageError(etspec::message("draft_window", {{"value", opt["--draft-window"]}}));
    }
    if (!opt.count("--draft")) {
      throw UsageError(etspec::message("window_needs_draft", {}));
    }
  }
  const std::string tree = opt.count("--tree") ? opt["--tree"] : "chain";
  int64_t length = etspec::contract::kDefaultChainLength;
  if (opt.count("--num-spec-tokens")) {
    length = number<int64_t>("--num-spec-tokens", opt["--num-spec-tokens"]);
  }
  std::unique_ptr<etspec::TreeShape> shape;
  if (tree == "chain") {
    shape = std::make_unique<etspec::ChainShape>(length);
  } else if (tree == "auto") {
    throw UsageError("--tree auto is not supported by the C++ runner yet; use chain, static or "
                     "dynamic");
  } else if (tree != "static" && tree != "dynamic") {
    throw UsageError(etspec::message("unknown_choice", {{"what", "--tree"},
                                                        {"value", tree},
                                                        {"choices", "chain, static, dynamic"}}));
  }
  // Dynamic-tree knobs (EAGLE's --depth counts expansion passes, SGLang's --num-steps levels).
  if (opt.count("--depth") && opt.count("--num-steps")) {
    throw UsageError(etspec::message(
        "knob_twice", {{"first", "--depth"}, {"second", "--num-steps"}, {"knob", "depth"}}));
  }
  int64_t depth = -1, topk = contract::kDefaultDynamicTopk, total_tokens = -1;
  if (opt.count("--depth")) depth = number<int64_t>("--depth", opt["--depth"]);
  if (opt.count("--num-steps")) depth = number<int64_t>("--num-steps", opt["--num-steps"]) - 1;
  if (opt.count("--draft-topk")) topk = number<int64_t>("--draft-topk", opt["--draft-topk"]);
  if (opt.count("--total-tokens")) {
    total_tokens = number<int64_t>("--total-tokens", opt["--total-tokens"]);
  }
  const std::string kv_strategy = opt.count("--kv") ? opt["--kv"] : contract::kDefaultKvStrategy;
  if (std::find(std::begin(etspec::contract::kKvStrategies),
                std::end(etspec::contract::kKvStrategies),
                kv_strategy) == std::end(etspec::contract::kKvStrategies)) {
    std::string choices;
    for (const char* k : etspec::contract::kKvStrategies) {
      choices += (choices.empty() ? "" : ", ") + std::string(k);
    }
    throw UsageError(etspec::message(
        "unknown_choice",
        {{"what", "KV strategy"}, {"value", kv_strategy}, {"choices", choices}}));
  }
  etspec::SamplingConfig sampling;
  if (opt.count("--temperature")) {
    sampling.temperature = number<double>("--temperature", opt["--temperature"]);
  }
  if (opt.count("--top-k")) sampling.top_k = number<int64_t>("--top-k", opt["--top-k"]);
  if (opt.count("--top-p")) sampling.top_p = number<double>("--top-p", opt["--top-p"]);
  if (opt.count("--seed")) {
    sampling.seed = number<uint64_t>("--seed", opt["--seed"]);
    sampling.seeded = true;
  }
  etspec::Sampler sampler(sampling);  // checks the settings before anything loads

  etspec::TargetProgram target(opt["--target"], weight_cache);
  std::unique_ptr<etspec::DraftProgram> draft;
  if (opt.count("--draft")) draft = std::make_unique<etspec::DraftProgram>(opt["--draft"], weight_cache);
  if (!opt.count("--max-new-tokens")) {  // as `etspec generate`: 128, or what the context holds
    const int64_t room = target.meta.max_context - static_cast<int64_t>(prompt.size());
    options.max_new_tokens =
        std::max<int64_t>(1, std::min<int64_t>(etspec::contract::kDefaultMaxNewTokens, room));
  }
  if (tree == "static") {
    // The Python runtime's default static tree: the best-first pruned tree filling the
    // widest verify (at most STATIC_TREE_MAX_NODES nodes).
    const int64_t nodes = std::max<int64_t>(
        1, std::min<int64_t>(target.meta.verify_width - 1,
                             etspec::contract::kStaticTreeMaxNodes));
    const std::string spec = opt.count("--static-tree") ? opt["--static-tree"]
                                                        : "N" + std::to_string(nodes);
    shape = std::make_unique<etspec::StaticTree>(etspec::StaticTree::parse(spec));
  } else if (tree == "dynamic") {
    // The Python runtime's default dynamic tree fills the widest verify
    // (settings.default_dynamic); each knob given replaces its default.
    const int64_t width = target.meta.verify_width;
    shape = std::make_unique<etspec::DynamicTree>(
        depth >= 0 ? depth : contract::default_dynamic_depth(width), topk,
        total_tokens >= 0 ? total_tokens : width);
  }
  std::unique_ptr<etspec::TokenGenerator> generator;
  if (speculative) {
    std::unique_ptr<etspec::SpeculativeDraftRunner> drafter;
    if (assistant) {
      drafter = std::make_unique<etspec::Gemma4AssistantDraftRunner>(target);
    } else if (lookup) {
      drafter = std::make_unique<etspec::PromptLookupDraftRunner>(max_ngram, min_ngram);
    } else {
      drafter = std::make_unique<etspec::Eagle3DraftRunner>(*draft, target.meta, window);
    }
    generator = std::make_unique<etspec::SpeculativeTokenGenerator>(
        std::move(drafter), target.meta, std::move(shape), kv_strategy);
  }
  etspec::Runner runner(target, std::move(generator));

  etspec::TokenCallback stream;
  if (!json) {
    stream = [](const std::vector<int64_t>& ids) {
      for (int64_t id : ids) std::cout << id << " ";
      std::cout << std::flush;
    };
  }
  int64_t samples = 1;
  if (opt.count("--num-samples")) {
    samples = number<int64_t>("--num-samples", opt["--num-samples"]);
  }
  if (samples < 1) throw UsageError("--num-samples must be at least 1");
  for (int64_t i = 0; i < samples; ++i) {
    report(runner.generate(prompt, options, sampler, stream), json);
  }
  return 0;
}

void report(const etspec::Result& result, bool json) {
  if (json) {
    std::cout << "{\"token_ids\": " << ids_json(result.token_ids) << ", \"stop_reason\": \""
              << result.stop_reason << "\", \"stats\": " << result.stats.to_json() << "}\n";
  } else {
    std::cout << "\n";
    std::cerr << "[" << result.stats.generated_tokens << " tokens, " << result.stop_reason;
    if (result.stats.verify_calls) {
      std::cerr << ", TPC "
                << 1.0 + double(result.stats.accepted_tokens) / result.stats.verify_calls;
    }
    std::cerr << "]\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const etspec::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
