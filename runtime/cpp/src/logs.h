// etspec/logs.py's job in C++: ExecuTorch logs load failures and CPU probes on stderr
// itself (some not even UTF-8 for a damaged file), which would bury a one-line error and
// clutter an app's output. The library routes them through its own handler, which drops
// them unless asked: ExecuTorch's register_pal, so no linker tricks are needed.
#pragma once

namespace etspec {

// Whether ExecuTorch's own log lines reach stderr (off by default; the runner's --verbose).
void set_executorch_logs(bool on);
// Installs the handler (idempotent); every Program does this before loading.
void install_log_handler();

}  // namespace etspec
