"""Every draft method by name: the one list a new drafter is added to."""

from __future__ import annotations

from etspec.contract import DEFAULT_DRAFT_METHOD
from etspec.errors import EtspecError
from etspec.runtime.speculative.combined import CombinedMethod
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.eagle3 import Eagle3Method
from etspec.runtime.speculative.gemma4_assistant import Gemma4AssistantMethod
from etspec.runtime.speculative.prompt_lookup import PromptLookupMethod

DRAFT_METHODS: dict[str, DraftMethod] = {
    m.name: m
    for m in (Eagle3Method(), PromptLookupMethod(), CombinedMethod(), Gemma4AssistantMethod())
}


__all__ = ["DEFAULT_DRAFT_METHOD", "DRAFT_METHODS", "aliases", "draft_method", "register"]


def register(method: DraftMethod) -> DraftMethod:
    """Add a method at run time (a plug-in, a test's toy drafter)."""
    DRAFT_METHODS[method.name] = method
    return method


def aliases() -> dict[str, str]:
    """Alias -> method name, over every registered method."""
    return {a: m.name for m in DRAFT_METHODS.values() for a in m.aliases}


def draft_method(name: str) -> DraftMethod:
    """The method called ``name`` (or one of its aliases)."""
    method = DRAFT_METHODS.get(aliases().get(name, name))
    if method is None:
        raise EtspecError(f"unknown draft method {name!r}; choose {', '.join(DRAFT_METHODS)}")
    return method
