"""Every fact the Python runtime and the C++ runner share is written once, in
``etspec/contract.py``, and reaches C++ only through the generated header: the header carries
the Python values, no C++ source repeats one, and the C++ twins of the contract's small rules
compute what the Python ones compute."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from etspec import contract
from etspec.contract import (
    DEFAULT_RANK_ACCEPT,
    MESSAGES,
    STAGES,
    STATS_FIELDS,
    band_start,
    cpp_header,
    default_dynamic_depth,
    hidden_spec_text,
    mask_width,
    width_method,
)
from etspec.runtime.stats import GenerationStats

CPP_SRC = Path(__file__).parents[1] / "runtime" / "cpp" / "src"
CPP_SOURCES = sorted(CPP_SRC.rglob("*.[ch]*"))
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _cpp_literals() -> dict[str, list[str]]:
    """Each C++ source's string literals (comments removed first)."""
    out = {}
    for path in CPP_SOURCES:
        text = re.sub(r"//[^\n]*", "", path.read_text())
        out[str(path.relative_to(CPP_SRC))] = _LITERAL.findall(text)
    return out


def _unescape(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


def test_the_header_carries_the_python_values() -> None:
    header = cpp_header()
    messages = dict(
        (k, _unescape(v)) for k, v in re.findall(r'\{"(\w+)", "((?:[^"\\]|\\.)*)"\},', header)
    )
    assert {k: messages[k] for k in MESSAGES} == MESSAGES
    stages = re.search(r"kStages\[\] = \{(.*)\};", header)
    assert stages and _LITERAL.findall(stages.group(1)) == list(STAGES)
    fields = re.findall(r"  X\((\w+), (COUNTED|DERIVED)\)", header)
    assert fields == [(n, k.upper()) for n, k in STATS_FIELDS]
    ranks = re.search(r"kDefaultRankAccept\[\] = \{(.*)\};", header)
    assert ranks and tuple(float(v) for v in ranks.group(1).split(",")) == DEFAULT_RANK_ACCEPT
    constants = {
        "kDefaultChainLength": contract.DEFAULT_CHAIN_LENGTH,
        "kDefaultMaxNewTokens": contract.DEFAULT_MAX_NEW_TOKENS,
        "kStaticTreeMaxNodes": contract.STATIC_TREE_MAX_NODES,
        "kDigestShown": contract.DIGEST_SHOWN,
        "kMaskGranule": contract.MASK_GRANULE,
        "kFormatVersion": contract.FORMAT_VERSION,
        "kDefaultKvStrategy": f'"{contract.DEFAULT_KV_STRATEGY}"',
        "kStopEos": f'"{contract.STOP_EOS}"',
        "kStopBudget": f'"{contract.STOP_BUDGET}"',
        "kTargetKvBytes": f'"{contract.TARGET_KV_BYTES}"',
        "kDraftWeightsBytes": f'"{contract.DRAFT_WEIGHTS_BYTES}"',
        "kHiddenSpecCheck": f'"{contract.HIDDEN_SPEC_CHECK}"',
        "kEagle3": f'"{contract.EAGLE3}"',
        "kGemma4AssistantMethod": f'"{contract.GEMMA4_ASSISTANT_METHOD}"',
    }
    for name, value in constants.items():
        assert re.search(rf"\b{name}(\[\])? = {re.escape(str(value))};", header), name


def test_python_stats_follow_the_contract_fields() -> None:
    assert list(GenerationStats().to_dict()) == [n for n, _ in STATS_FIELDS]
    assert list(GenerationStats().stage_s) == list(STAGES)


def _shared_names() -> set[str]:
    """Names C++ must take from the header: stages, stats fields, method names, KV
    strategies, stop reasons, memory keys, metadata values."""
    names = {*STAGES, *(n for n, _ in STATS_FIELDS), *contract.KV_STRATEGIES}
    names |= {*contract.TARGET_METHODS, *contract.DRAFT_METHODS, contract.DRAFT_D2T}
    names |= {contract.ASSISTANT_STEP, contract.TOKENIZER_JSON, contract.HIDDEN_SPEC_CHECK}
    names |= {contract.EAGLE3, contract.GEMMA4_ASSISTANT}
    names |= {contract.STOP_EOS, contract.STOP_BUDGET, contract.STOP_CALLBACK}
    names |= {contract.TARGET_WEIGHTS_BYTES, contract.TARGET_KV_BYTES}
    names |= {contract.DRAFT_WEIGHTS_BYTES, contract.DRAFT_KV_BYTES}
    return names


def _fragments(template: str) -> list[str]:
    """The literal stretches of a message template long enough to be a copy, not a word."""
    return [p for p in re.split(r"\{\w+\}", template) if len(p.strip()) >= 12]


def _copies(literals_by_file: dict[str, list[str]]) -> list[str]:
    """Literals that repeat a contract name or a stretch of a contract message."""
    names, copies = _shared_names(), []
    for file, literals in literals_by_file.items():
        for lit in literals:
            text = _unescape(lit)
            if text in names:
                copies.append(f"{file}: {text!r} (a contract name)")
            copies += [
                f"{file}: {text!r} (from MESSAGES[{key!r}])"
                for key, template in MESSAGES.items()
                if any(part in text for part in _fragments(template))
                # a phrase of it (an option name alone, like --static-tree, is no copy)
                or (len(text.strip()) >= 12 and " " in text.strip() and text in template)
            ]
    return copies


def test_no_cpp_source_repeats_a_contract_string() -> None:
    assert CPP_SOURCES, "runtime/cpp/src is missing"
    copies = _copies(_cpp_literals())
    assert not copies, "C++ repeats contract strings instead of reading the header:\n" + (
        "\n".join(copies)
    )


def _python_strings() -> set[str]:
    """Every string constant of the Python runtime and the contract's package."""
    root = Path(__file__).parents[1]
    files = [*(root / "runtime").rglob("*.py"), *(root / "etspec").rglob("*.py")]
    return {
        node.value
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_no_cpp_source_repeats_a_python_runtime_phrase() -> None:
    """Beyond MESSAGES: a phrase both runtimes say must come from the contract, so one
    written into a Python module and again into C++ is a copy waiting to drift."""
    strings = _python_strings()
    copies = [
        f"{file}: {text!r}"
        for file, literals in _cpp_literals().items()
        for text in (_unescape(lit).strip() for lit in literals)
        if len(text) >= 20 and " " in text and any(text in s for s in strings)
    ]
    assert not copies, "C++ repeats a Python runtime string; move it to MESSAGES:\n" + (
        "\n".join(copies)
    )


def test_the_scan_finds_a_hand_written_copy() -> None:
    """What the scan above would flag: a message rebuilt from pieces, a stage name."""
    rebuilt = ["prompt of ", " tokens does not fit the context of "]
    assert _copies({"x.cpp": rebuilt})
    assert _copies({"x.cpp": ["verify"]})
    assert not _copies({"x.cpp": ["[", ", ", "usage: etspec_runner --target T.pte"]})


CPP_PROBE = r"""
#include <cstdio>
#include "etspec_contract.h"
using namespace etspec::contract;
int main() {
  for (long w : {1L, 4L, 8L}) std::printf("%s\n", width_method("target_verify", w, 8).c_str());
  for (long needed : {0L, 1L, 63L, 64L, 65L, 500L, 4096L, 5000L})
    for (long ctx : {64L, 512L, 4096L})
      std::printf("%lld\n", (long long)mask_width(needed, ctx, ctx + 16));
  for (long lowest : {0L, 5L, 100L, 700L, 4000L})
    for (long committed : {2L, 64L, 768L, 4096L})
      for (long window : {16L, 512L})
        std::printf("%lld\n", (long long)band_start(lowest, committed, window));
  for (long w : {1L, 4L, 8L, 15L, 16L, 32L, 64L, 200L})
    std::printf("%lld\n", (long long)default_dynamic_depth(w));
  std::printf("%s\n", hidden_spec_text("layer_input", {2, 4, 6}).c_str());
  std::printf("%s\n", hidden_spec_text("final_norm", {18}).c_str());
}
"""


def _python_probe() -> list[str]:
    out = [width_method("target_verify", w, 8) for w in (1, 4, 8)]
    out += [
        str(mask_width(n, c, c + 16))
        for n in (0, 1, 63, 64, 65, 500, 4096, 5000)
        for c in (64, 512, 4096)
    ]
    out += [
        str(band_start(lo, n, w))
        for lo in (0, 5, 100, 700, 4000)
        for n in (2, 64, 768, 4096)
        for w in (16, 512)
    ]
    out += [str(default_dynamic_depth(w)) for w in (1, 4, 8, 15, 16, 32, 64, 200)]
    out += [hidden_spec_text("layer_input", (2, 4, 6)), hidden_spec_text("final_norm", (18,))]
    return out


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_the_cpp_twins_compute_what_python_computes(tmp_path: Path) -> None:
    (tmp_path / "etspec_contract.h").write_text(cpp_header())
    (tmp_path / "probe.cpp").write_text(CPP_PROBE)
    subprocess.run(
        ["c++", "-std=c++17", "-Wall", "-Werror", "probe.cpp", "-o", "probe"],
        cwd=tmp_path,
        check=True,
    )
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == _python_probe()
