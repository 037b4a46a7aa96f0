"""The OpenAPI generator: drf-spectacular's, plus the problem responses every operation can give."""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from gpucloud.api.problems import PROBLEM_JSON


class ProblemSerializer(serializers.Serializer[dict[str, Any]]):
    """An RFC 9457 problem: what went wrong and, in `errors`, which field broke which rule."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    instance = serializers.CharField(required=False)  # type: ignore[assignment]
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)  # type: ignore[assignment]


class AutoSchema(openapi.AutoSchema):
    """Documents the errors too, so clients (and the schema fuzz test) know every answer they may get."""

    def get_override_parameters(self) -> list[Any]:
        """`?dry_run=true` on the writes of views with `dry_run_allowed` (tenants/api/viewsets.py)."""
        parameters = list(super().get_override_parameters())
        if getattr(self.view, "dry_run_allowed", False) and self.method not in ("GET", "HEAD", "OPTIONS"):
            parameters.append(
                OpenApiParameter(
                    "dry_run",
                    OpenApiTypes.STR,
                    enum=["true", "1"],
                    description="run the write in full, then roll it back: its answer, nothing kept",
                )
            )
        return parameters

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        codes = ["400", "401", "403", "404", "429"]
        if self.method not in ("GET", "HEAD", "OPTIONS"):
            # 503 `busy`: a write that lost a deadlock or serialization conflict on every bounded retry
            # (gpucloud/transactions.py); it carries Retry-After and is safe to send again.
            codes += ["409", "413", "422", "503"]
        for code in codes:
            if code not in responses:
                # drf-spectacular leaves this helper unannotated
                responses[code] = self._get_response_for_code(  # type: ignore[no-untyped-call]
                    ProblemSerializer, code, [PROBLEM_JSON], direction
                )
        return responses


NULL = {"type": "null"}


def null_as_in_openapi_31(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's post-processing hook: null written as OpenAPI 3.1 (JSON Schema) has it, everywhere.

    Two shapes remain after drf-spectacular's own 3.1 output, and both refuse a real `null`:
    - `nullable: true` from code that writes 3.0 schemas itself (DRF's paginator: `next`, `previous`), which
      3.1 ignores: it becomes `type: [<type>, "null"]`;
    - a nullable JSON field (any value) as `oneOf: [{}, {type: null}]`: null matches both branches and oneOf
      wants exactly one; `{}` admits null already, so the pair becomes `{}`.
    """

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.pop("nullable", False) and "type" in node:
                kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
                node["type"] = [*kinds, "null"] if "null" not in kinds else kinds
            if node.get("oneOf") in ([{}, NULL], [NULL, {}]):
                del node["oneOf"]
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(result)
    return result
