"""Typed exceptions for errors a user can cause.

Every message is one line that names the problem and, where there is one, the fix. The CLI
prints ``error: <message>`` and exits non-zero without a traceback for these; anything else
is a bug and keeps its traceback.
"""


class EtspecError(Exception):
    """Base class for user-facing errors (bad input, bad files, mismatched artifacts)."""


class CheckpointError(EtspecError):
    """A checkpoint folder is missing, incomplete or not in a supported layout."""


class UnsupportedModelError(EtspecError):
    """The checkpoint describes a model or option etspec cannot export."""


class ArtifactError(EtspecError):
    """A ``.pte`` file is missing, damaged, foreign or of an unsupported format version."""


class MetadataMismatchError(ArtifactError):
    """A draft artifact does not fit the target artifact it is paired with."""


class OutputExistsError(EtspecError):
    """Refusing to overwrite a file the user owns."""


class ExportError(EtspecError):
    """Lowering failed for a reason the user can act on (bad option combination)."""
