"""Fixtures the portal's tests borrow: `host`, a Kubernetes host cluster on the API stand-in."""

from clusters.tests.conftest import host

__all__ = ["host"]
