"""Opaque public ids (`ten_…`, `hc_…`): what URLs and payloads show instead of primary keys."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from django.db import models

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

if TYPE_CHECKING:  # Django's fields take type arguments only in django-stubs, not at run time
    _CharField = models.CharField[str, str]
else:
    _CharField = models.CharField


def new_public_id(prefix: str) -> str:
    return f"{prefix}_" + "".join(secrets.choice(ALPHABET) for _ in range(16))


class PublicIdField(_CharField):
    """A unique, immutable `<prefix>_<16 base36 chars>` id, generated on first save."""

    def __init__(self, *args: Any, prefix: str = "", **kwargs: Any) -> None:
        self.prefix = prefix
        kwargs.setdefault("max_length", 32)
        kwargs.setdefault("unique", True)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["prefix"] = self.prefix
        for key in ("max_length", "unique", "editable"):
            kwargs.pop(key, None)
        return name, path, args, kwargs

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if not value:
            value = new_public_id(self.prefix)
            setattr(model_instance, self.attname, value)
        return value
