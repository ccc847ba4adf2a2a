// etspec.h over the C++ library: every call catches what the library throws and turns it
// into a return code and a thread-local message, so no exception crosses into C.
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "etspec.h"
#include "runner.h"

struct etspec_runner {
  std::unique_ptr<etspec::Runner> runner;
};

struct etspec_result {
  etspec::Result result;
};

namespace {

thread_local std::string last_error;

// Runs `body`; a throw becomes `failed` and the message of etspec_last_error().
template <typename T, typename F>
T guarded(T failed, F&& body) {
  try {
    last_error.clear();
    return body();
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
  } catch (const std::exception& e) {
    last_error = e.what();
    const size_t nl = last_error.find('\n');  // one line, whatever the library said
    if (nl != std::string::npos) last_error.resize(nl);
  } catch (...) {
    last_error = "unknown error";
  }
  return failed;
}

// The first `size` bytes of a caller's options (an older caller's struct is shorter: the
// fields it lacks keep their defaults).
template <typename T>
T read_options(const T* given, void (*init)(T*)) {
  T out;
  init(&out);
  if (given != nullptr) {
    std::memcpy(&out, given, std::min(given->struct_size, sizeof(T)));
    out.struct_size = sizeof(T);
  }
  return out;
}

}  // namespace

extern "C" {

const char* etspec_version(void) { return ETSPEC_VERSION; }

int etspec_c_api_version(void) { return ETSPEC_C_API_VERSION; }

const char* etspec_last_error(void) { return last_error.c_str(); }

void etspec_load_options_init(etspec_load_options* options) {
  if (options == nullptr) return;
  *options = etspec_load_options{};
  options->struct_size = sizeof(etspec_load_options);
}

etspec_runner* etspec_load(const char* target, const char* draft,
                           const etspec_load_options* options) {
  return guarded<etspec_runner*>(nullptr, [&] {
    if (target == nullptr) throw etspec::Error("etspec_load: the target path is NULL");
    const auto o = read_options(options, etspec_load_options_init);
    etspec::LoadOptions load;
    if (o.draft_method != nullptr) load.draft_method = o.draft_method;
    if (o.tree != nullptr) load.tree.mode = o.tree;
    if (o.num_spec_tokens > 0) load.tree.num_spec_tokens = o.num_spec_tokens;
    if (o.kv_strategy != nullptr) load.kv_strategy = o.kv_strategy;
    auto handle = std::make_unique<etspec_runner>();
    handle->runner = etspec::Runner::load(target, draft != nullptr ? draft : "", load);
    return handle.release();
  });
}

void etspec_free(etspec_runner* runner) { delete runner; }

void etspec_generate_options_init(etspec_generate_options* options) {
  if (options == nullptr) return;
  *options = etspec_generate_options{};
  options->struct_size = sizeof(etspec_generate_options);
  options->max_new_tokens = -1;
  options->top_p = 1.0;
}

int etspec_generate(etspec_runner* runner, const etspec_prompt* prompt,
                    const etspec_generate_options* options, etspec_token_callback callback,
                    void* user_data, const volatile int* cancel, etspec_result** result) {
  if (result != nullptr) *result = nullptr;
  return guarded<int>(1, [&] {
    if (runner == nullptr || prompt == nullptr || result == nullptr) {
      throw etspec::Error("etspec_generate: runner, prompt and result must not be NULL");
    }
    const int given = (prompt->text != nullptr) + (prompt->ids != nullptr) +
                      (prompt->messages_json != nullptr);
    if (given != 1) {
      throw etspec::Error("etspec_generate: " + etspec::message("one_prompt",
                          {{"choices", "text, ids and messages_json"}}));
    }
    const auto o = read_options(options, etspec_generate_options_init);
    etspec::GenerationConfig config;
    config.max_new_tokens = o.max_new_tokens;
    config.sampling.temperature = o.temperature;
    config.sampling.top_k = o.top_k;
    config.sampling.top_p = o.top_p;
    config.sampling.seed = o.seed;
    config.sampling.seeded = o.seeded != 0;
    config.ignore_eos = o.ignore_eos != 0;
    config.reuse_prefix = o.reuse_prefix != 0;
    etspec::Runner& r = *runner->runner;
    const etspec::Prompt p =
        prompt->text != nullptr ? etspec::Prompt(std::string(prompt->text))
        : prompt->ids != nullptr
            ? etspec::Prompt(std::vector<int64_t>(prompt->ids, prompt->ids + prompt->n_ids))
            : etspec::Prompt(r.chat_ids(prompt->messages_json));
    etspec::TokenCallback on_tokens;
    if (callback != nullptr || cancel != nullptr) {
      on_tokens = [&](const std::vector<int64_t>& ids, const std::string& text) {
        const bool keep =
            callback == nullptr || callback(ids.data(), ids.size(), text.c_str(), user_data) != 0;
        return keep && (cancel == nullptr || *cancel == 0);
      };
    }
    auto out = std::make_unique<etspec_result>();
    out->result = r.generate(p, config, nullptr, nullptr, on_tokens);
    *result = out.release();
    return 0;
  });
}

void etspec_stop(etspec_runner* runner) {
  if (runner != nullptr) runner->runner->stop();
}

int etspec_reset(etspec_runner* runner) {
  return guarded<int>(1, [&] {
    if (runner == nullptr) throw etspec::Error("etspec_reset: runner is NULL");
    runner->runner->reset();
    return 0;
  });
}

size_t etspec_result_ids(const etspec_result* result, const int64_t** ids) {
  if (result == nullptr) return 0;
  if (ids != nullptr) *ids = result->result.token_ids.data();
  return result->result.token_ids.size();
}

const char* etspec_result_text(const etspec_result* result) {
  return result != nullptr ? result->result.text.c_str() : "";
}

const char* etspec_result_stop_reason(const etspec_result* result) {
  return result != nullptr ? result->result.stop_reason.c_str() : "";
}

void etspec_result_stats(const etspec_result* result, etspec_stats* stats) {
  if (result == nullptr || stats == nullptr) return;
  const etspec::Stats& s = result->result.stats;
  *stats = etspec_stats{s.prompt_tokens,    s.cached_tokens,   s.generated_tokens,
                        s.prefill_calls,    s.decode_calls,    s.verify_calls,
                        s.draft_calls,      s.drafted_tokens,  s.accepted_tokens,
                        s.acceptance_rate(), s.tpc(),          s.ttft_s,
                        s.total_s,          s.tokens_per_s()};
}

void etspec_result_free(etspec_result* result) { delete result; }

}  // extern "C"
