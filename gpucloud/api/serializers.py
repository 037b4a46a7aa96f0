"""Serializer bases: the limits a model declares (lengths, integer ranges) hold in the API, stated once.

An integer column is bounded to what the column holds on any database (gpucloud.limits), with the allowed
range in the message. Serializers that are not model serializers take a model's field with `model_field()`,
so a length is never written twice.

A serializer names what it renders: `ModelSerializer[Tenant]` its model, a plain one the model it reads,
`Serializer[dict[str, Any]]` a dict the view builds (or only documents), and `Serializer[None]` a request body
that is validated and never rendered.
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from typing import Any, TypeVar

from django.db import models
from rest_framework import serializers

from gpucloud.limits import INTEGER_RANGES

_M = TypeVar("_M", bound=models.Model)


class ModelSerializer(serializers.ModelSerializer[_M]):
    """DRF's model serializer with every integer bounded to its column's range, named in the refusal.

    DRF builds a model serializer's fields from the model's metadata again for every instance, which costs
    more than the serializing itself for one object. They depend only on the class (no serializer here
    changes its fields by context), so each class builds them once and every instance gets a deep copy, as DRF
    does with declared fields.
    """

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        cls = type(self)
        built = cls.__dict__.get("_built_fields")  # this class's own, never a parent's (its Meta differs)
        if built is None:
            built = super().get_fields()
            cls._built_fields = built  # type: ignore[attr-defined]
        return copy.deepcopy(built)

    def build_standard_field(
        self, field_name: str, model_field: models.Field[Any, Any]
    ) -> tuple[type, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        column = INTEGER_RANGES.get(model_field.get_internal_type())
        if column is not None and issubclass(field_class, serializers.IntegerField):
            kwargs["min_value"] = max(kwargs.get("min_value", column[0]), column[0])
            kwargs["max_value"] = min(kwargs.get("max_value", column[1]), column[1])
        return field_class, kwargs

    def include_extra_kwargs(
        self, kwargs: MutableMapping[str, Any], extra_kwargs: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        # After Meta.extra_kwargs (a tighter `min_value`, say), so the message names the range that holds.
        kwargs = super().include_extra_kwargs(kwargs, extra_kwargs)
        low, high = kwargs.get("min_value"), kwargs.get("max_value")
        if isinstance(low, int) and isinstance(high, int):
            kwargs["error_messages"] = {**range_messages(low, high), **kwargs.get("error_messages", {})}
        return kwargs


def range_messages(low: int, high: int) -> dict[str, str]:
    message = f"must be a whole number from {low} to {high}"
    return {"min_value": message, "max_value": message, "max_string_length": message}


def model_field(model: type[models.Model], name: str, **kwargs: Any) -> serializers.Field[Any, Any, Any, Any]:
    """The serializer field a ModelSerializer would build for `model.name`, with `kwargs` on top."""
    meta = type("Meta", (), {"model": model, "fields": [name], "extra_kwargs": {name: kwargs}})
    serializer: ModelSerializer[models.Model] = type(
        f"{model.__name__}Field", (ModelSerializer,), {"Meta": meta}
    )()
    return serializer.fields[name]
