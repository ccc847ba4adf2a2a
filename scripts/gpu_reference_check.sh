#!/usr/bin/env bash
# The eager reference program on a CUDA GPU, every speculative mode, in one go:
# validate in the 6 KV x tree modes and auto, prompt lookup, generate --compare and bench,
# on the bundled checkpoints (tests/test_cuda.py). Needs torch with CUDA; not ExecuTorch.
#
#   bash scripts/gpu_reference_check.sh prepare   # here: wheel + click into build/gpu-site
#   bash scripts/gpu_reference_check.sh run       # on the GPU machine, from the repo root
#
# `prepare` installs the etspec wheel (pure Python), click and pytest with --no-deps into
# build/gpu-site, so a GPU machine without network needs only that folder and the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
site=build/gpu-site
case "${1:-run}" in
prepare)
    rm -rf build/wheel "$site"
    python3 -m pip wheel --no-deps --no-build-isolation . -w build/wheel -q
    python3 -m pip install --no-deps --target "$site" -q build/wheel/etspec-*.whl click \
        pytest pluggy iniconfig packaging
    ;;
run)
    repo=$PWD
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    # Outside the repo root, so that its etspec/ folder does not shadow the installed
    # package (setup.py maps runtime/, models/, ... into it); no conftest: it exports .pte.
    cd "$(mktemp -d)"
    PYTHONPATH="$repo/$site${PYTHONPATH:+:$PYTHONPATH}" python3 - <<'EOF'
import importlib.util, platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, "
      f"cuda {torch.version.cuda}, executorch installed: "
      f"{importlib.util.find_spec('executorch') is not None}")
EOF
    PYTHONPATH="$repo/$site${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -c /dev/null \
        --noconftest -p no:cacheprovider -rA -q --durations=0 "$repo/tests/test_cuda.py"
    ;;
*)
    echo "usage: $0 [prepare|run]" >&2
    exit 2
    ;;
esac
