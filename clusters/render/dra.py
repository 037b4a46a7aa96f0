"""Dynamic Resource Allocation (resource.k8s.io/v1) objects for host clusters that serve it and run NVIDIA's
DRA driver (`gpu.nvidia.com`): shared/reference/kubernetes-objects.md §6.

- a `DeviceClass` per GPU class tenants hold, whole or MIG, selecting the driver's devices with CEL on the
  product name (the NVML names the catalog knows) and, for a MIG class, `type == 'mig'` and its `profile`;
- inside the tenant's vCluster (namespace `default`), a `ResourceClaimTemplate` per class it holds, named
  after the class, so a pod asks for `resourceClaims: [{name: gpu, resourceClaimTemplateName:
  h200-141gb.mig-1g.18gb}]`. vCluster syncs claim templates and claims only to the host, never from it, so
  the templates are applied by the vCluster itself (`experimental.deploy.vcluster.manifests`,
  render/vcluster.py); their synced copies, and the claims made from them, land in the tenant's host
  namespace under vCluster's translated names, where the ResourceQuota counts the claims' devices;
- on each DeviceClass, the label `gpucloud.io/gpu-class` (the class), by which a tenant's vCluster syncs
  from the host only the DeviceClasses of the classes the tenant holds;
- in the tenant's ResourceQuota, `<device class>.deviceclass.resource.k8s.io/devices` per class: the devices
  its claims may hold (guaranteed + burst), next to the extended-resource limits.

Shared (time-sliced) and HAMi classes are not served through DRA here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import yaml

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import SHARED, Manifest, obj, owned

from .kueue import flavor_name

API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
REQUEST = "gpu"
DEVICE_COUNT = ".deviceclass.resource.k8s.io/devices"  # ResourceQuota key suffix: devices claimed via a class
GPU_CLASS = "gpucloud.io/gpu-class"  # DeviceClass label: the GPU class it selects
IN_VCLUSTER_NAMESPACE = "default"  # where the claim templates live inside the tenant's vCluster


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


def classes_of(tenant: TenantSpec) -> list[str]:
    """The GPU classes the tenant holds that are served through DRA, each once, sorted."""
    return sorted({q.gpu_class for q in tenant.quotas if served(q)})


def class_label(gpu_class: str) -> str:
    """The value of a DeviceClass's `gpucloud.io/gpu-class` label (a valid label value: dots, dashes)."""
    return flavor_name(gpu_class)


def render_device_classes(tenants: Sequence[TenantSpec]) -> list[Manifest]:
    classes = sorted({name for t in tenants for name in classes_of(t)})
    manifests = []
    for name in classes:
        spec = {"selectors": [{"cel": {"expression": selector(name)}}]}
        device_class = obj(API, "DeviceClass", device_class_name(name), spec=spec)
        device_class["metadata"]["labels"] = {GPU_CLASS: class_label(name)}
        manifests.append(owned(device_class, SHARED))
    return manifests


def claim_template(gpu_class: str, name: str, namespace: str) -> Manifest:
    """A ResourceClaimTemplate asking for one device of the class."""
    request = {
        "name": REQUEST,
        "exactly": {
            "deviceClassName": device_class_name(gpu_class),
            "allocationMode": "ExactCount",
            "count": 1,
        },
    }
    return obj(
        API, "ResourceClaimTemplate", name, namespace, spec={"spec": {"devices": {"requests": [request]}}}
    )


def render_claim_templates(tenant: TenantSpec) -> list[Manifest]:
    """One single-device claim template per class the tenant holds, for inside its vCluster (namespace
    `default`), named after the class.

    Without gpucloud's ownership labels: vCluster copies labels to the synced host objects, and the host
    pass would prune a labelled copy it did not render, which vCluster would then make again.
    """
    templates = []
    for name in classes_of(tenant):
        template = claim_template(name, flavor_name(name), IN_VCLUSTER_NAMESPACE)
        template["metadata"]["labels"] = {GPU_CLASS: class_label(name)}
        templates.append(template)
    return templates


def template_manifests(tenant: TenantSpec) -> str:
    """The claim templates as one multi-document YAML string, as vCluster's deploy manifests take them."""
    return "---\n".join(yaml.safe_dump(t, sort_keys=True) for t in render_claim_templates(tenant))


def quota_limits(quotas: Iterable[QuotaSpec]) -> dict[str, int]:
    """ResourceQuota keys limiting the devices a namespace's claims hold, per device class."""
    return {
        f"{device_class_name(q.gpu_class)}{DEVICE_COUNT}": q.guaranteed + q.burst for q in quotas if served(q)
    }
