"""The data sources: a GPU class, a tenant, and a tenant cluster's kubeconfig."""

from __future__ import annotations

from typing import Any

from tf.iface import DataSource, ReadDataContext
from tf.types import Number

from terraform_provider.base import Base, reported
from terraform_provider.client import path
from terraform_provider.resources import TenantResource, attr


class GpuClassData(Base, DataSource):  # type: ignore[misc]  # tf ships no type information
    """A GPU class the fleet offers (GET /api/v1/gpu-classes/{name}/)."""

    name = "gpu_class"
    attributes = [
        attr("name", doc="the class's name, e.g. h200-141gb or h200-141gb.mig-1g.18gb", required=True),
        attr("kind", doc="whole, mig or shared", computed=True),
        attr("gpu_model", doc="the GPU model's catalog name, e.g. h200-141gb", computed=True),
        attr(
            "mig_profile", doc="the MIG profile of a mig class, e.g. 1g.18gb (empty otherwise)", computed=True
        ),
        attr("resource_name", doc="the Kubernetes extended resource", computed=True),
        attr("gpu_fraction", doc="share of one physical GPU, e.g. '1/7'", computed=True),
        attr("units_per_gpu", Number(), doc="most units of this class one GPU gives", computed=True),
    ]

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading GPU class {config['name']}"):
            found = self.client.find(path("gpu-classes", config["name"]))
            if found is None:
                ctx.diagnostics.add_error(
                    f"{config['name']!r} is not a GPU class", "GET /api/v1/gpu-classes/ lists the classes"
                )
                return None
            return self.full(found)
        return None


class TenantData(Base, DataSource):  # type: ignore[misc]  # tf ships no type information
    """A tenant that already exists, managed here or elsewhere."""

    name = "tenant"
    attributes = [
        attr("slug", doc="the tenant's slug", required=True),
        *(
            attr(a.name, a.type, doc=a.description, computed=True)
            for a in TenantResource.attributes
            if a.name not in ("slug", "create_timeout", "delete_timeout")
        ),
    ]

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading tenant {config['slug']}"):
            tenant = self.client.find(path("tenants", config["slug"]))
            if tenant is None:
                ctx.diagnostics.add_error(f"there is no tenant {config['slug']!r} you can see")
                return None
            cluster = tenant.get("cluster") or {}
            return self.full(
                tenant
                | {"host_cluster": cluster.get("host_cluster"), "namespace": cluster.get("namespace")}
                | {"endpoint": cluster.get("endpoint")}
            )
        return None


class KubeconfigData(Base, DataSource):  # type: ignore[misc]  # tf ships no type information
    """The tenant cluster's kubeconfig (every read is audited by gpucloud)."""

    name = "kubeconfig"
    attributes = [
        attr("tenant", doc="the tenant's slug", required=True),
        attr("kubeconfig", doc="YAML", computed=True, sensitive=True),
    ]

    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading the kubeconfig of {config['tenant']}"):
            text = self.client.get(path("tenants", config["tenant"], "kubeconfig"))
            return {"tenant": config["tenant"], "kubeconfig": text}
        return None


DATA_SOURCES = [GpuClassData, TenantData, KubeconfigData]
