"""Failures talking to a Kubernetes API server, sorted by whether retrying may help."""

from __future__ import annotations

from gpucloud.errors import PermanentError, TemporaryError


class DriverError(Exception):
    """A failure talking to a host cluster."""


class TemporaryDriverError(DriverError, TemporaryError):
    """Worth retrying later: timeouts, 409, 429, 5xx, connection refused."""


class PermanentDriverError(DriverError, PermanentError):
    """Retrying will not help until someone changes something: 403, 422, a missing CRD."""
