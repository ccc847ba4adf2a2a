/* etspec's C API: what app bindings (JNI/Kotlin, Swift, C#, Rust, Go, Python ctypes) link,
 * as every binding of llama.cpp links llama.h. Opaque handles, plain C types, no exception
 * crosses it: a call that fails returns NULL or a nonzero code, and etspec_last_error() says
 * why in one line (per thread). Link libetspec_c (shared) from the CMake package.
 *
 *   etspec_runner* r = etspec_load("target.pte", "draft.pte", NULL);
 *   if (!r) { fprintf(stderr, "%s\n", etspec_last_error()); return 1; }
 *   etspec_generate_options o; etspec_generate_options_init(&o); o.max_new_tokens = 64;
 *   etspec_prompt p = {"def fib(n):", NULL, 0, NULL};
 *   etspec_result* out = NULL;
 *   if (etspec_generate(r, &p, &o, on_tokens, user, NULL, &out) != 0) { ... }
 *   puts(etspec_result_text(out)); etspec_result_free(out); etspec_free(r);
 */
#ifndef ETSPEC_H
#define ETSPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C API's version: a new function or a new field at the end of an options struct
 * raises it; struct_size lets an older caller's struct be read as what it is. */
#define ETSPEC_C_API_VERSION 1

typedef struct etspec_runner etspec_runner;
typedef struct etspec_result etspec_result;

/* The library's version ("0.1.0") and the C API's (ETSPEC_C_API_VERSION it was built with). */
const char* etspec_version(void);
int etspec_c_api_version(void);

/* The last failure's message on this thread (one line; "" when none). Valid until this
 * thread's next call. */
const char* etspec_last_error(void);

typedef struct etspec_load_options {
  size_t struct_size;         /* sizeof(etspec_load_options), set by the init function */
  const char* draft_method;   /* NULL: the default ("combined" with a draft) */
  const char* tree;           /* NULL: "auto"; or "chain", "static", "dynamic" */
  int64_t num_spec_tokens;    /* chain length; <= 0: the default */
  const char* kv_strategy;    /* NULL: position-overwrite (the default); or scratch-commit */
} etspec_load_options;
void etspec_load_options_init(etspec_load_options* options);

/* Loads a target .pte and, for speculation, its draft (NULL: target-only, or a method that
 * needs no draft file). NULL on failure (a missing file, a mismatched pair, bad options). */
etspec_runner* etspec_load(const char* target, const char* draft,
                           const etspec_load_options* options);
void etspec_free(etspec_runner* runner);

typedef struct etspec_generate_options {
  size_t struct_size;      /* sizeof(etspec_generate_options), set by the init function */
  int64_t max_new_tokens;  /* -1: the default (128, or what the context holds) */
  double temperature;      /* 0: greedy (the default) */
  int64_t top_k;           /* 0: off */
  double top_p;            /* 1: off */
  uint64_t seed;           /* read when seeded is nonzero */
  int seeded;
  int ignore_eos;
  int reuse_prefix;        /* prefill only what follows what the KV holds (a conversation) */
} etspec_generate_options;
void etspec_generate_options_init(etspec_generate_options* options);

/* Exactly one of: text (encoded with the target's tokenizer), ids (n_ids of them), or
 * messages_json (a JSON list of {"role", "content"} rendered by the target's template). */
typedef struct etspec_prompt {
  const char* text;
  const int64_t* ids;
  size_t n_ids;
  const char* messages_json;
} etspec_prompt;

/* Each emission: its ids and the text they complete (UTF-8, never a split character; may
 * be empty). Return 0 to stop generating (the result's stop reason is then callback). */
typedef int (*etspec_token_callback)(const int64_t* ids, size_t n_ids, const char* text,
                                     void* user_data);

/* Generates after `prompt`. `callback` may be NULL; `cancel` (may be NULL) is read after
 * every emission: nonzero stops the generation as a callback returning 0 does (set it from
 * any thread). On success returns 0 and sets *result (free it with etspec_result_free);
 * else returns nonzero, sets *result to NULL, and etspec_last_error() says why. */
int etspec_generate(etspec_runner* runner, const etspec_prompt* prompt,
                    const etspec_generate_options* options, etspec_token_callback callback,
                    void* user_data, const volatile int* cancel, etspec_result** result);

/* Stops a running etspec_generate from any thread (stop reason "stop"). */
void etspec_stop(etspec_runner* runner);
/* Clears every cache (the conversation held too). Nonzero while generating elsewhere. */
int etspec_reset(etspec_runner* runner);

typedef struct etspec_stats {
  int64_t prompt_tokens, cached_tokens, generated_tokens;
  int64_t prefill_calls, decode_calls, verify_calls, draft_calls;
  int64_t drafted_tokens, accepted_tokens;
  double acceptance_rate, tokens_per_verify, ttft_s, total_s, tokens_per_s;
} etspec_stats;

/* The generated ids (*ids valid until the result is freed) and their count. */
size_t etspec_result_ids(const etspec_result* result, const int64_t** ids);
const char* etspec_result_text(const etspec_result* result);
/* Why it stopped: eos, max_new_tokens, callback or stop (the contract's stop reasons). */
const char* etspec_result_stop_reason(const etspec_result* result);
void etspec_result_stats(const etspec_result* result, etspec_stats* stats);
void etspec_result_free(etspec_result* result);

#ifdef __cplusplus
}
#endif

#endif /* ETSPEC_H */
