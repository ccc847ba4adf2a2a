# Sourced by the README commands (scripts/main_job.sh, scripts/test.sh): makes the project's
# virtual environment once, installs etspec into it (editable, with the extras named in
# $1) and activates it, so every later `python3`, `etspec` and `pip` is the venv's.
#
# A venv, never the system Python: Debian/Ubuntu's python3 refuses `pip install` outside one
# (PEP 668, externally-managed-environment). Settings:
#   PYTHON=/path/to/python3.X    the interpreter to build the venv from (3.10+; default: the
#                                first python3, python3.13 ... python3.10 on PATH)
#   ETSPEC_VENV=DIR              where the venv lives (default: .venv)
#   ETSPEC_TORCH_INDEX=URL|none  where torch comes from. PyPI's Linux torch is the CUDA build
#                                (several GB); by default the CPU build is taken from
#                                https://download.pytorch.org/whl/cpu when that answers,
#                                else from PyPI (or a local wheel pip's config points to).
etspec_extras=${1:-}
etspec_venv=${ETSPEC_VENV:-.venv}
etspec_log=$(mktemp)

etspec_fail() {
    echo "error: $1" >&2
    [ -s "$etspec_log" ] && sed 's/^/  /' "$etspec_log" | tail -20 >&2
    exit 1
}

etspec_python() {
    local c
    for c in ${PYTHON:-python3 python3.13 python3.12 python3.11 python3.10}; do
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

if [ ! -f "$etspec_venv/.etspec-venv" ]; then
    etspec_py=$(etspec_python) ||
        etspec_fail "etspec needs Python 3.10 or newer; install one or set PYTHON=/path/to/python3.X"
    rm -rf "$etspec_venv"  # what an interrupted first run left
    "$etspec_py" -m venv "$etspec_venv" >"$etspec_log" 2>&1 || {
        rm -rf "$etspec_venv"
        etspec_fail "$etspec_py cannot make a virtual environment; on Debian/Ubuntu install it with: sudo apt install python3-venv"
    }
    echo "$etspec_py" >"$etspec_venv/.etspec-venv"
fi
# shellcheck disable=SC1091
. "$etspec_venv/bin/activate"

if ! python -c 'import torch' >/dev/null 2>&1; then
    etspec_torch_index=${ETSPEC_TORCH_INDEX:-auto}
    if [ "$etspec_torch_index" = auto ]; then
        etspec_torch_index=none
        if [ "$(uname -s)" = Linux ] && python - <<'EOF' >/dev/null 2>&1; then
import urllib.request
urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=5)
EOF
            etspec_torch_index=https://download.pytorch.org/whl/cpu
        fi
    fi
    etspec_torch_args=()
    if [ "$etspec_torch_index" != none ]; then
        # An extra index: torch's own dependencies still come from PyPI, and its
        # 2.13.0+cpu ranks above PyPI's 2.13.0.
        etspec_torch_args=(--extra-index-url "$etspec_torch_index")
    fi
    echo "installing torch 2.13.0 (CPU) into $etspec_venv ..." >&2
    python -m pip install -q "${etspec_torch_args[@]}" torch==2.13.0 >"$etspec_log" 2>&1 ||
        etspec_fail "pip could not install torch==2.13.0 into $etspec_venv"
fi

# Reinstall only when the packaging or the extras change (an editable install follows the
# code by itself).
etspec_stamp=$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)-"$etspec_extras"
if [ "$(cat "$etspec_venv/.etspec-install" 2>/dev/null)" != "$etspec_stamp" ]; then
    echo "installing etspec${etspec_extras:+[$etspec_extras]} into $etspec_venv ..." >&2
    python -m pip install -q -e ".${etspec_extras:+[$etspec_extras]}" >"$etspec_log" 2>&1 ||
        etspec_fail "pip could not install etspec into $etspec_venv"
    echo "$etspec_stamp" >"$etspec_venv/.etspec-install"
fi
rm -f "$etspec_log"
