"""Dynamic Resource Allocation (resource.k8s.io/v1) objects for host clusters that serve it and run NVIDIA's
DRA driver (`gpu.nvidia.com`): shared/reference/kubernetes-objects.md §6.

- a `DeviceClass` per GPU class tenants hold, whole or MIG, selecting the driver's devices with CEL on the
  product name (the NVML names the catalog knows) and, for a MIG class, `type == 'mig'` and its `profile`;
- in each tenant namespace, a `ResourceClaimTemplate` per class it holds, named after the class, so a pod asks
  for `resourceClaims: [{name: gpu, resourceClaimTemplateName: h200-141gb.mig-1g.18gb}]`;
- in the tenant's ResourceQuota, `<device class>.deviceclass.resource.k8s.io/devices` per class: the devices
  its claims may hold (guaranteed + burst), next to the extended-resource limits.

Shared (time-sliced) and HAMi classes are not served through DRA here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import SHARED, Manifest, obj, owned

from .kueue import flavor_name

API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
REQUEST = "gpu"
DEVICE_COUNT = ".deviceclass.resource.k8s.io/devices"  # ResourceQuota key suffix: devices claimed via a class


def served(quota: QuotaSpec) -> bool:
    """Whole-GPU and MIG classes are served through DRA."""
    if quota.resource_name.startswith("nvidia.com/mig-"):
        return True
    return quota.resource_name == "nvidia.com/gpu" and not catalog.hami_percent(quota.gpu_class)


def device_class_name(gpu_class: str) -> str:
    return f"gpucloud-{flavor_name(gpu_class)}"


def selector(gpu_class: str) -> str:
    """The CEL expression picking the driver's devices of one GPU class."""
    model_slug, _, rest = gpu_class.partition(".")
    model = catalog.model_by_slug(model_slug)
    names = ", ".join(f"'{name}'" for name in (model.dcgm_model_names if model else ()))
    attrs = f"device.attributes['{DRIVER}']"
    terms = [f"device.driver == '{DRIVER}'", f"{attrs}.productName in [{names}]"]
    if rest.startswith("mig-"):
        terms += [f"{attrs}.type == 'mig'", f"{attrs}.profile == '{rest.removeprefix('mig-')}'"]
    else:
        terms.append(f"{attrs}.type == 'gpu'")
    return " && ".join(terms)


def render_device_classes(tenants: Sequence[TenantSpec]) -> list[Manifest]:
    classes = sorted({q.gpu_class for t in tenants for q in t.quotas if served(q)})
    return [
        owned(
            obj(
                API,
                "DeviceClass",
                device_class_name(name),
                spec={"selectors": [{"cel": {"expression": selector(name)}}]},
            ),
            SHARED,
        )
        for name in classes
    ]


def render_claim_templates(tenant: TenantSpec) -> list[Manifest]:
    """One single-device claim template per class the tenant holds."""
    templates = []
    for quota in sorted((q for q in tenant.quotas if served(q)), key=lambda q: q.gpu_class):
        request = {
            "name": REQUEST,
            "exactly": {
                "deviceClassName": device_class_name(quota.gpu_class),
                "allocationMode": "ExactCount",
                "count": 1,
            },
        }
        spec = {"spec": {"devices": {"requests": [request]}}}
        name = flavor_name(quota.gpu_class)
        templates.append(
            owned(obj(API, "ResourceClaimTemplate", name, tenant.namespace, spec=spec), tenant.slug)
        )
    return templates


def quota_limits(quotas: Iterable[QuotaSpec]) -> dict[str, int]:
    """ResourceQuota keys limiting the devices a namespace's claims hold, per device class."""
    return {
        f"{device_class_name(q.gpu_class)}{DEVICE_COUNT}": q.guaranteed + q.burst for q in quotas if served(q)
    }
