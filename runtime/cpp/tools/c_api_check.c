/* etspec_c_check: a plain C program over etspec.h, which tests drive.
 *   etspec_c_check TARGET.pte DRAFT.pte|- IDS MAX_NEW [CANCEL_AFTER]
 * IDS: comma-separated prompt ids. Prints {"ids": [...], "pieces": N, "stop": "...",
 * "version": "..."} on stdout; a failure prints "error: MESSAGE" on stderr and exits 1.
 * CANCEL_AFTER: set the cancel flag after that many emissions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etspec.h"

typedef struct {
  int emissions, cancel_after;
  volatile int cancel;
} Progress;

static int on_tokens(const int64_t* ids, size_t n, const char* text, void* user) {
  Progress* p = (Progress*)user;
  (void)ids;
  (void)text;
  if (n > 0) p->emissions++;
  if (p->cancel_after > 0 && p->emissions >= p->cancel_after) p->cancel = 1;
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: etspec_c_check TARGET DRAFT|- IDS MAX_NEW [CANCEL_AFTER]\n");
    return 2;
  }
  int64_t ids[4096];
  size_t n = 0;
  for (char* tok = strtok(argv[3], ","); tok != NULL && n < 4096; tok = strtok(NULL, ",")) {
    ids[n++] = strtoll(tok, NULL, 10);
  }
  etspec_runner* runner = etspec_load(argv[1], strcmp(argv[2], "-") == 0 ? NULL : argv[2], NULL);
  if (runner == NULL) {
    fprintf(stderr, "error: %s\n", etspec_last_error());
    return 1;
  }
  etspec_generate_options options;
  etspec_generate_options_init(&options);
  options.max_new_tokens = strtoll(argv[4], NULL, 10);
  options.ignore_eos = 1;
  etspec_prompt prompt = {NULL, ids, n, NULL};
  Progress progress = {0, argc > 5 ? atoi(argv[5]) : 0, 0};
  etspec_result* result = NULL;
  if (etspec_generate(runner, &prompt, &options, on_tokens, &progress, &progress.cancel,
                      &result) != 0) {
    fprintf(stderr, "error: %s\n", etspec_last_error());
    etspec_free(runner);
    return 1;
  }
  const int64_t* out = NULL;
  const size_t count = etspec_result_ids(result, &out);
  printf("{\"ids\": [");
  for (size_t i = 0; i < count; ++i) printf("%s%lld", i ? ", " : "", (long long)out[i]);
  printf("], \"pieces\": %d, \"stop\": \"%s\", \"version\": \"%s\"}\n", progress.emissions,
         etspec_result_stop_reason(result), etspec_version());
  etspec_result_free(result);
  etspec_free(runner);
  return 0;
}
