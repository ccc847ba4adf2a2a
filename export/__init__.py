"""Checkpoint -> ExecuTorch ``.pte`` lowering. Nothing here runs generation."""

from etspec.export.export_draft import export_draft
from etspec.export.export_target import export_target

__all__ = ["export_draft", "export_target"]
