#!/usr/bin/env bash
# Run an aarch64 binary of `build.sh --arch aarch64` here, under qemu-user with the aarch64
# sysroot (its libstdc++ and libc); the binary finds the SDK's libraries by its RPATH:
#   bash runtime/cpp/qemu.sh build/cpp-aarch64/etspec_runner --target T.pte --prompt ...
# Speed under emulation means nothing; this checks tokens.
set -euo pipefail
command -v qemu-aarch64-static >/dev/null || {
    echo "error: no qemu-aarch64-static: apt-get install qemu-user-static" >&2
    exit 1
}
[ -d /usr/aarch64-linux-gnu/lib ] || {
    echo "error: no aarch64 sysroot in /usr/aarch64-linux-gnu: apt-get install g++-aarch64-linux-gnu" >&2
    exit 1
}
# A Neoverse-N1 (the Cortex-A76 class of a Raspberry Pi 5 or a Graviton 2: dot-product, no
# i8mm/SVE): under qemu 7.2's default "max" CPU, XNNPACK's kernels for the int8 recipes gave
# Gemma 3 270M nonsense tokens, where this CPU gives x86's text. ETSPEC_QEMU_CPU picks another.
exec qemu-aarch64-static -cpu "${ETSPEC_QEMU_CPU:-neoverse-n1}" -L /usr/aarch64-linux-gnu "$@"
