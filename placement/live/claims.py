"""GPUs a pod holds through Dynamic Resource Allocation (resource.k8s.io/v1 ResourceClaims, Kubernetes 1.34+).

A DRA pod asks for no ``nvidia.com/gpu``: its ``spec.resourceClaims`` name claims, each either directly
(``resourceClaimName``) or through a template (``resourceClaimTemplateName``; the claim made from it is named
in ``status.resourceClaimStatuses[].resourceClaimName``, matched by the entry's ``name``), read by
`placement.live.pods.claim_names`. What the pod holds
is what the scheduler allocated to those claims: ``status.allocation.devices.results[]`` (``request``,
``driver``, ``pool``, ``device``), the pool being the node.

Devices of NVIDIA's DRA driver (``driver: gpu.nvidia.com``; its DeviceClasses ``gpu.nvidia.com`` and
``mig.nvidia.com``, or gpucloud's per-class ``gpucloud-<class>``, clusters/render/dra.py) are named
(k8s-dra-driver-gpu, ``cmd/gpu-kubelet-plugin/deviceinfo.go``):

- ``gpu-<minor>``: a whole GPU;
- ``gpu-<minor>-mig-<profile id>-<start>-<size>``: a MIG instance on GPU ``<minor>``, of the NVML GPU
  instance profile ``<profile id>`` (0 = 7g, 5 = 4g, 9 = 3g, 14 = 2g, 15 = 1g with two memory slices, 19 = 1g,
  20 = 1g+me), placed at memory slice ``<start>``, ``<size>`` slices long. The profile's name for the node's
  model (``1g.18gb`` on an H200) comes from the model's MIG geometry (`placement.engine.mig`) by compute
  slices and memory slices; failing that, from a gpucloud DeviceClass named after a MIG class.

The GPU's minor number stands for its index on the node, as the ``gpucloud.io/gpu-index`` annotation does
for device-plugin pods. Other drivers' devices, VFIO pass-through devices and claims not yet allocated give
nothing.

`ClaimStore` keeps the host cluster's claims: listed whole with each pod list, and one fetched (GET) when a
bound pod's claim is missing or not yet allocated in the last list (allocated after it). A cluster that
does not serve resource.k8s.io/v1 (before 1.34, or DRA switched off), or forbids reading claims, is read
without them: logged once, no failure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucloud.kube import kinds as k
from gpucloud.kube.api import ApiStatusError, KubeApi, NotFound
from placement.engine.mig import MODELS
from placement.live.pods import Devices

log = logging.getLogger(__name__)
DRIVER = "gpu.nvidia.com"
WHOLE = re.compile(r"^gpu-(\d+)$")
MIG = re.compile(r"^gpu-(\d+)-mig-(\d+)-(\d+)-(\d+)$")
# NVML GPU instance profile id -> (compute slices, media extensions); memory slices come from the name.
GI_PROFILES = {0: (7, False), 5: (4, False), 9: (3, False), 14: (2, False), 15: (1, False), 19: (1, False)}
GI_PROFILES[20] = (1, True)
Claim = Mapping[str, Any]


def allocated(claim: Claim) -> list[Mapping[str, Any]]:
    """The claim's allocated devices of NVIDIA's DRA driver ([] while not allocated)."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    return [r for r in results or [] if isinstance(r, Mapping) and r.get("driver") == DRIVER]


def is_allocated(claim: Claim) -> bool:
    return bool(((claim.get("status") or {}).get("allocation") or {}).get("devices"))


def mig_profile(model: str, profile_id: int, size: int, device_class: str = "") -> str:
    """The name of a MIG instance's profile on `model` ("" when it cannot be told, see the module
    docstring)."""
    known = GI_PROFILES.get(profile_id)
    profiles = MODELS.get(model, {})
    if known is not None:
        compute, media = known
        for name, p in profiles.items():
            if p.compute == compute and p.memory == size and name.endswith("+me") == media:
                return name
    _, sep, named = device_class.partition(".mig-")  # gpucloud-<model>.mig-<profile> (clusters/render/dra.py)
    if sep and device_class.startswith("gpucloud-"):
        for name in profiles:
            if re.sub(r"[^a-z0-9.-]+", "-", name) == named:
                return name
    return ""


def devices(claims: Iterable[Claim], model: str) -> Devices:
    """What a pod holds through its allocated claims on a node of `model`: whole GPUs (by minor), or one MIG
    instance (a pod holding several keeps the first, logged). Devices(0) when none of NVIDIA's."""
    whole: list[int] = []
    mig: list[tuple[int, str]] = []
    for claim in claims:
        classes = _request_classes(claim)
        for result in allocated(claim):
            device = str(result.get("device") or "")
            if found := WHOLE.match(device):
                whole.append(int(found[1]))
            elif found := MIG.match(device):
                gpu, profile_id, _, size = (int(g) for g in found.groups())
                name = mig_profile(model, profile_id, size, classes.get(str(result.get("request")), ""))
                if name:
                    mig.append((gpu, name))
                else:
                    log.warning(
                        "live view cannot name a MIG device", extra={"device": device, "model": model}
                    )
    if mig:
        if len(mig) > 1 or whole:
            log.warning(
                "live view keeps one MIG instance of a DRA pod", extra={"devices": len(mig) + len(whole)}
            )
        return Devices(mig_profile=mig[0][1], indexes=(mig[0][0],))
    return Devices(len(whole), indexes=tuple(whole)) if whole else Devices(0)


def _request_classes(claim: Claim) -> dict[str, str]:
    """Device class per request name (a ``firstAvailable`` subrequest is ``<request>/<subrequest>``)."""
    out = {}
    for request in (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []:
        if not isinstance(request, Mapping):
            continue
        name = str(request.get("name"))
        exactly = request.get("exactly") or {}
        if exactly.get("deviceClassName"):
            out[name] = str(exactly["deviceClassName"])
        for sub in request.get("firstAvailable") or []:
            if isinstance(sub, Mapping) and sub.get("deviceClassName"):
                out[f"{name}/{sub.get('name')}"] = str(sub["deviceClassName"])
    return out


class ClaimStore:
    """The host cluster's ResourceClaims as the feed last listed them, fetching one on demand."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.served = True
        self.claims: dict[tuple[str, str], Claim] = {}
        self.fetches = 0

    def refresh(self) -> None:
        """List every claim (all namespaces) again; a cluster without the API keeps none."""
        try:
            listed = self.api.get(k.RESOURCE_CLAIM.path())
        except ApiStatusError as e:
            # Not served is normal (no DRA on the cluster); refused is a setup to fix, said every pass.
            level = logging.DEBUG if isinstance(e, NotFound) else logging.WARNING
            log.log(level, "live view reads no ResourceClaims", extra={"status": e.status, "error": str(e)})
            self.served, self.claims = False, {}
            return
        self.served = True
        self.claims = {_key(c): c for c in listed.get("items") or [] if isinstance(c, Mapping)}

    def get(self, namespace: str, name: str, *, fetch: bool) -> Claim | None:
        """The claim; fetched when the list had it not (or not yet allocated) and `fetch` allows."""
        claim = self.claims.get((namespace, name))
        if (claim is None or not is_allocated(claim)) and fetch and self.served:
            self.fetches += 1
            try:
                claim = self.api.get(k.RESOURCE_CLAIM.path(namespace, name))
            except ApiStatusError as e:
                if not isinstance(e, NotFound):
                    log.warning(
                        "live view cannot read a ResourceClaim", extra={"claim": name, "error": str(e)}
                    )
                return claim
            self.claims[(namespace, name)] = claim
        return claim


def _key(claim: Claim) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")
