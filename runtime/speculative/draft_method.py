"""What a draft method is to the rest of the house: one record per method, written in the
method's own file beside its runner, and listed once in ``registry.py``.

A new drafter is one new file (its ``SpeculativeDraftRunner`` and a ``DraftMethod``) and one
registry line: loading, the CLI's ``--draft-method`` choices and help, the cost probes of
``--tree auto`` and the C++ bridge all read the record. An option of the method is a row of
``contract.RUN_SETTINGS`` naming it as an owner, and a field of ``runtime/spec.py``'s
``RunnerSpec`` (docs/architecture.md has a worked example).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from etspec.runtime.program import Program
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec


class DraftMethod(ABC):
    """One way of drafting. Subclasses set ``name`` and ``help`` and build the runner."""

    name: ClassVar[str]
    help: ClassVar[str]
    #: Other names users bring from other runtimes (vLLM's ``ngram``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Whether ``--draft`` names a draft program of the method's own (.pte or checkpoint).
    draft_program: ClassVar[bool] = False
    #: Whether the C++ runner has this method too (under the same name and options).
    in_cpp: ClassVar[bool] = False

    def speculates(self, spec: RunnerSpec) -> bool:
        """Whether ``spec`` asks for speculation at all (EAGLE-3 without a draft: no)."""
        return True

    def check(self, spec: RunnerSpec) -> None:  # noqa: B027  # optional hook
        """Refuse settings this method cannot honour, before anything loads."""

    def eager_target_options(self, spec: RunnerSpec) -> dict[str, Any]:
        """Extra arguments of the eager reference target (a drafter built into it)."""
        return {}

    @abstractmethod
    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        """The draft runner over the loaded programs."""
