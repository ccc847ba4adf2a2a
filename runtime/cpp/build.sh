#!/usr/bin/env bash
# Build the C++ runner against the executorch wheel installed for python3:
#   bash runtime/cpp/build.sh [BUILD_DIR]   ->   BUILD_DIR/etspec_runner (default build/cpp)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cpp}
py=${PYTHON:-python3}
prefix=$("$py" -c 'import executorch, os; print(os.path.join(list(executorch.__path__)[0], "lib", "cmake"))')
cmake -S runtime/cpp -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}" >/dev/null
echo "$build/etspec_runner"
