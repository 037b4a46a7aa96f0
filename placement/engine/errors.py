"""Errors the placement engine raises on bad input.

Every error names *what* was wrong and *where* (a pod, a node, a CSV row), so a caller can show it to a
user as-is instead of a traceback from deep inside numpy.
"""


class EngineError(ValueError):
    """Base class: bad input to the engine. ``what`` and ``where`` are kept for API error bodies."""

    def __init__(self, what: str, where: str) -> None:
        super().__init__(f"{what} (at {where})")
        self.what = what
        self.where = where


class UnplaceablePod(EngineError):
    """A pod (or gang) that no node of this fleet could ever host, even when empty."""


class UnknownGpuModel(EngineError):
    """A GPU model that the catalogue or the fleet does not know."""


class UnknownMigProfile(EngineError):
    """A MIG profile that the GPU model does not offer."""


class MalformedTraceRow(EngineError):
    """A trace CSV with the wrong columns or a row that does not parse."""
