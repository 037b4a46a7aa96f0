"""The provider: its configuration (endpoint, token), its resource and data source types, and `main`."""

from __future__ import annotations

import os
import sys
from typing import Any
from urllib.parse import urlparse

from tf import provider as tf_provider
from tf.iface import PlanContext, Provider
from tf.provider import ProviderServicer, _decode_state
from tf.runner import run_provider
from tf.schema import Attribute, Schema
from tf.types import String
from tf.utils import Diagnostics

from terraform_provider import ADDRESS
from terraform_provider.base import known
from terraform_provider.client import Client
from terraform_provider.data_sources import DATA_SOURCES
from terraform_provider.resources import RESOURCES


class GpucloudProvider(Provider):  # type: ignore[misc]  # tf ships no type information
    def __init__(self) -> None:
        self._client: Client | None = None

    def get_model_prefix(self) -> str:
        return "gpucloud_"

    def full_name(self) -> str:
        return ADDRESS

    def get_provider_schema(self, diags: Diagnostics) -> Schema:
        return Schema(
            attributes=[
                Attribute(
                    "endpoint", String(), description="gpucloud's URL (else GPUCLOUD_ENDPOINT)", optional=True
                ),
                Attribute(
                    "token",
                    String(),
                    description="an API token, gpc_… (else GPUCLOUD_TOKEN)",
                    optional=True,
                    sensitive=True,
                ),
            ]
        )

    def validate_config(self, diags: Diagnostics, config: dict[str, Any]) -> None:
        endpoint = config.get("endpoint")
        if known(endpoint) and urlparse(str(endpoint)).scheme not in ("http", "https"):
            diags.add_error(
                f"endpoint: {endpoint!r} is not an http(s) URL",
                "write it like https://gpucloud.example.com",
                path=["endpoint"],
            )

    def configure_provider(self, diags: Diagnostics, config: dict[str, Any]) -> None:
        endpoint = config.get("endpoint") or os.environ.get("GPUCLOUD_ENDPOINT", "")
        token = config.get("token") or os.environ.get("GPUCLOUD_TOKEN", "")
        for name, value, variable in (
            ("endpoint", endpoint, "GPUCLOUD_ENDPOINT"),
            ("token", token, "GPUCLOUD_TOKEN"),
        ):
            if not value:
                diags.add_error(
                    f"gpucloud needs an {name}", f"set {name} in the provider block or {variable}"
                )
        if not diags.has_errors():
            self._client = Client(endpoint, token)

    @property
    def configured(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RuntimeError("the provider is not configured")  # Terraform configures before any call
        return self._client

    def get_data_sources(self) -> list[Any]:
        return list(DATA_SOURCES)

    def get_resources(self) -> list[Any]:
        return list(RESOURCES)


class Servicer(ProviderServicer):  # type: ignore[misc]  # tf ships no type information
    """tf's servicer, but a create is planned through `Resource.plan` too (tf calls it for updates only),
    so the API's dry run refuses a bad new object at `terraform plan`, not halfway through an apply."""

    def PlanResourceChange(self, request: Any, context: Any) -> Any:
        response = super().PlanResourceChange(request, context)
        diags = Diagnostics()
        type_name = request.type_name
        attrs, blocks = self._get_res_attrs(type_name), self._get_res_blocks(type_name)
        _, prior = _decode_state(diags, attrs, blocks, request.prior_state)
        _, planned = _decode_state(diags, attrs, blocks, response.planned_state)
        if prior is not None or planned is None or response.diagnostics or diags.has_errors():
            return response
        resource = self.app.new_resource(self._get_res_cls(type_name))
        resource.plan(PlanContext(diags, type_name, changed_fields=set(planned)), None, planned)
        response.diagnostics.extend(diags.to_pb())
        return response


def main() -> None:
    tf_provider.ProviderServicer = Servicer  # run_provider looks it up when it starts
    run_provider(GpucloudProvider(), sys.argv)
