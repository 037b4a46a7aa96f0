"""What a database column can hold, the same on every database: the API and the services refuse more.

Integer columns take PostgreSQL's ranges (Django's portable ones), which SQLite would not enforce: a value is
refused alike in the embedded default and in production.
"""

from __future__ import annotations

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

INTEGER_RANGES: dict[str, tuple[int, int]] = BaseDatabaseOperations.integer_field_ranges


def integer_range(model: type[models.Model], name: str) -> tuple[int, int]:
    """The lowest and highest value the integer column `model.name` holds."""
    return INTEGER_RANGES[model._meta.get_field(name).get_internal_type()]
