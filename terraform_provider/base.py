"""What every gpucloud resource and data source shares: the client, API errors as diagnostics, durations."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from tf.schema import Attribute, Schema
from tf.types import Unknown
from tf.utils import Diagnostics

from terraform_provider.client import ApiError, Client

if TYPE_CHECKING:
    from terraform_provider.provider import GpucloudProvider

DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def seconds(text: str) -> int | None:
    """ "10m", "90s", "1h30m" in seconds; None when it is not such a duration."""
    match = DURATION.fullmatch(text or "")
    if not text or match is None:
        return None
    hours, minutes, secs = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + secs


def known(value: Any) -> bool:
    return value is not None and value is not Unknown


class Exists(Exception):
    """What a create would make is there already (made through the API, the portal or another configuration):
    it is adopted with `terraform import`, never silently taken over. Raised at plan time, and again at apply
    time for what appeared in between."""

    def __init__(self, type_name: str, what: str, import_id: str):
        super().__init__(f"{what} already exists")
        self.detail = (
            f"adopt it with: terraform import {type_name}.<name> {import_id}\n(<name>: this resource's name, "
            "as in the address above), or remove the block"
        )


@contextmanager
def reported(diags: Diagnostics, what: str) -> Iterator[None]:
    """An API refusal becomes a Terraform error carrying the API's own message."""
    try:
        yield
    except ApiError as exc:
        diags.add_error(f"{what}: {exc.summary}", exc.message)
    except Exists as exc:
        diags.add_error(f"{what}: {exc}", exc.detail)
    except OSError as exc:  # requests' connection errors are OSErrors
        diags.add_error(f"{what}: the gpucloud API cannot be reached", str(exc))


class Base:
    """A resource or data source type of this provider; `name` without the `gpucloud_` prefix."""

    name: ClassVar[str]
    attributes: ClassVar[list[Attribute]]

    def __init__(self, provider: GpucloudProvider):
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return cls.name

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=1, attributes=cls.attributes, description=cls.__doc__)

    @property
    def client(self) -> Client:
        return self.provider.client

    def full(self, values: dict[str, Any]) -> dict[str, Any]:
        """Every attribute present (Terraform wants the whole object), missing ones null."""
        return {a.name: values.get(a.name) for a in self.attributes}


def split_id(diags: Diagnostics, text: str, parts: list[str]) -> list[str] | None:
    """An import id `a/b`: exactly len(parts) non-empty pieces, or an error saying the form."""
    pieces = text.split("/")
    if len(pieces) != len(parts) or not all(pieces):
        diags.add_error(
            f"{text!r} is not an id this resource imports", f"use {'/'.join(f'<{p}>' for p in parts)}"
        )
        return None
    return pieces


Check = Callable[[Diagnostics, dict[str, Any]], None]
