#!/usr/bin/env bash
# Build the C++ runner (and libetspec, libetspec_c, etspec_server) against an executorch
# wheel's C++ SDK:
#   bash runtime/cpp/build.sh [BUILD_DIR]                  the installed wheel, this machine
#                                                           -> BUILD_DIR/etspec_runner (build/cpp)
#   bash runtime/cpp/build.sh --arch aarch64 [BUILD_DIR]   arm64 Linux, cross-compiled against
#                                                           the aarch64 wheel (build/cpp-aarch64)
# The aarch64 wheel is downloaded once into .etspec-cache/aarch64 (never installed); run its
# binaries here with runtime/cpp/qemu.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=
if [ "${1:-}" = --arch ]; then
    arch=${2:?--arch needs a value (aarch64)}
    shift 2
    [ "$arch" = aarch64 ] || { echo "error: --arch $arch: only aarch64 is supported" >&2; exit 2; }
fi
py=${PYTHON:-python3}
if [ -z "$arch" ]; then
    build=${1:-build/cpp}
    prefix=$("$py" -c 'import executorch, os; print(os.path.join(list(executorch.__path__)[0], "lib", "cmake"))')
    cmake -S runtime/cpp -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
else
    build=${1:-build/cpp-aarch64}
    command -v aarch64-linux-gnu-g++ >/dev/null || {
        echo "error: no aarch64 cross compiler: apt-get install g++-aarch64-linux-gnu" >&2
        exit 1
    }
    # The wheel this machine's executorch is (the project pins it), for the other CPU.
    version=$("$py" -c 'from importlib.metadata import version; print(version("executorch"))' \
        2>/dev/null) || { echo "error: no executorch for $py: install etspec first" >&2; exit 1; }
    sdk=${ETSPEC_AARCH64_SDK:-.etspec-cache/aarch64/executorch-$version}
    if [ ! -d "$sdk/executorch/lib/cmake" ]; then
        echo "downloading the aarch64 executorch $version wheel into $sdk (once)" >&2
        mkdir -p "$sdk"
        "$py" -m pip download --quiet --no-deps --only-binary=:all: \
            --platform manylinux_2_28_aarch64 --python-version 3.11 \
            "executorch==$version" -d "$sdk/wheel"
        "$py" -m zipfile -e "$sdk"/wheel/executorch-*.whl "$sdk/unpacked"
        mkdir -p "$sdk/executorch"
        mv "$sdk/unpacked/executorch/lib" "$sdk/unpacked/executorch/include" "$sdk/executorch/"
        [ -d "$sdk/unpacked/executorch/share" ] && mv "$sdk/unpacked/executorch/share" "$sdk/executorch/"
        rm -rf "$sdk/unpacked" "$sdk/wheel"
    fi
    sdk=$(cd "$sdk" && pwd)
    ETSPEC_SDK_ROOT=$sdk cmake -S runtime/cpp -B "$build" \
        -DCMAKE_TOOLCHAIN_FILE="$PWD/runtime/cpp/cmake/aarch64-linux-gnu.cmake" \
        -DCMAKE_PREFIX_PATH="$sdk/executorch/lib/cmake" \
        -DPython3_EXECUTABLE="$(command -v "$py")" >/dev/null
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" >/dev/null
echo "$build/etspec_runner"
