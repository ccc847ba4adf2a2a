#include "logs.h"

#include <atomic>
#include <cstdio>

#include <executorch/runtime/platform/platform.h>

namespace etspec {
namespace {

std::atomic<bool> g_logs{false};

void emit(et_timestamp_t, et_pal_log_level_t level, const char* filename, const char*,
          size_t line, const char* message, size_t length) {
  if (!g_logs) return;
  std::fprintf(stderr, "%c executorch %s:%zu] %.*s\n", static_cast<char>(level), filename, line,
               static_cast<int>(length), message);
}

}  // namespace

void install_log_handler() {
  static const bool installed = executorch::runtime::register_pal(
      executorch::runtime::PalImpl::create(emit, __FILE__));
  (void)installed;
}

void set_executorch_logs(bool on) {
  g_logs = on;
  install_log_handler();
}

}  // namespace etspec
