"""Registering Kubernetes host clusters: reach them, read what they run, import their GPU nodes.

This sits in `workers` because it talks to clusters through the driver; the rows it writes are the fleet's.
"""

from __future__ import annotations

import re

import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kubernetes import client

from clusters.drivers.discovery import ClusterDiscovery, GpuNode, UnsupportedCluster, check_profile, discover
from clusters.node_sync import sync_nodes
from clusters.profiles import profile_of
from core import audit
from core.audit import Actor
from fleet.models import HostCluster
from gpucloud import crypto
from gpucloud.errors import Conflict, PermissionDenied, ServiceError, ValidationFailed
from gpucloud.kube.api import KubeApi, NotFound, RetryPolicy, api_client_from_kubeconfig
from gpucloud.kube.errors import DriverError
from gpucloud.kube.kinds import TENANT_RESOURCE
from gpucloud.kubeconfig import KubeconfigRefused

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
VCLUSTER_MODES = ("helmrelease", "platform")
# Registration answers the caller directly: try briefly rather than back off for a minute.
REGISTRATION_RETRY = RetryPolicy(attempts=2, base_seconds=0.2, cap_seconds=1.0, timeout_seconds=5.0)


def parse_kubeconfig(text: str) -> client.ApiClient:
    """A client from a kubeconfig pasted by a person, through the one loader; a 422 naming what is wrong."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationFailed.on("kubeconfig", f"the kubeconfig is not valid YAML: {exc}") from None
    if not isinstance(document, dict) or not document.get("clusters"):
        raise ValidationFailed.on("kubeconfig", "the kubeconfig names no clusters; paste the whole file")
    try:
        return api_client_from_kubeconfig(text)
    except KubeconfigRefused:
        raise  # a 422 naming the field: a command or a file path is never run or read
    except Exception as exc:  # the client raises ConfigException, ValueError, KeyError … on odd files
        raise ValidationFailed.on("kubeconfig", f"the kubeconfig cannot be used: {exc}") from None


def _validate(name: str, scheduler: str, vcluster_mode: str) -> None:
    if not NAME_RE.fullmatch(name):  # fullmatch: `$` alone would let a final newline through
        raise ValidationFailed.on(
            "name", f"{name!r} is not a DNS-safe name (lowercase letters, digits, hyphens)"
        )
    if HostCluster.objects.filter(name=name).exists():
        raise Conflict(f"a host cluster called {name!r} exists already", errors={"name": ["already taken"]})
    if scheduler not in HostCluster.Scheduler.values:
        raise ValidationFailed.on("scheduler", f"{scheduler!r} is not a scheduler; use kueue or kai")
    if vcluster_mode not in VCLUSTER_MODES:
        raise ValidationFailed.on("vcluster_mode", f"{vcluster_mode!r}: use helmrelease or platform")


def register_host_cluster(
    *,
    actor: Actor,
    name: str,
    kubeconfig: str,
    scheduler: str,
    region: str = "",
    endpoint_base: str = "",
    vcluster_mode: str = "helmrelease",
    topology_levels: tuple[str, ...] = (),
    watch_tenants: str = "",
) -> HostCluster:
    """Register a Kubernetes host cluster after checking it can serve the chosen scheduler.

    The cluster is asked first (outside any transaction: it may be slow); nothing is written unless it
    answered and can serve what was asked. With `watch_tenants` (a namespace), the Tenant and RateCard
    custom resources declared there are applied by gpucloud (`gitops.controller`); their CRDs must be
    installed.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("registering a host cluster needs a platform administrator")
    _validate(name, scheduler, vcluster_mode)
    if watch_tenants and not NAME_RE.fullmatch(watch_tenants):
        raise ValidationFailed.on("watch_tenants", f"{watch_tenants!r} is not a namespace name")
    host_cluster = HostCluster(
        name=name,
        region=region,
        driver=HostCluster.Driver.KUBERNETES,
        scheduler=scheduler,
        endpoint_base=endpoint_base or f"https://{name}.{settings.ENDPOINT_DOMAIN}",
        vcluster_mode=vcluster_mode,
        topology_levels=list(topology_levels),
        tenants_namespace=watch_tenants,
    )
    found = discover_with(parse_kubeconfig(kubeconfig), watch_tenants)
    host_cluster.addons = found.addons
    host_cluster.gpu_resources = list(found.gpu_resources())
    try:
        check_profile(found, profile_of(host_cluster))
    except UnsupportedCluster as exc:
        raise ValidationFailed.on(
            "scheduler" if "scheduler" in str(exc) else "vcluster_mode", str(exc)
        ) from None
    return _save(actor, host_cluster, kubeconfig, found)


def discover_with(api_client: client.ApiClient, watch_tenants: str = "") -> ClusterDiscovery:
    """What the cluster runs (and, with `watch_tenants`, that it serves Tenant resources there), asked
    briefly; a 400 when it does not answer. Closes the client."""
    try:
        if watch_tenants:
            _check_tenant_crds(KubeApi(api_client, REGISTRATION_RETRY), watch_tenants)
        return discover(KubeApi(api_client, REGISTRATION_RETRY))
    except DriverError as exc:
        raise ServiceError(
            f"the cluster could not be read: {exc}",
            errors={"kubeconfig": ["the cluster did not answer as asked"]},
        ) from None
    finally:
        api_client.close()


def _check_tenant_crds(api: KubeApi, namespace: str) -> None:
    try:
        api.get(TENANT_RESOURCE.path(namespace), {"limit": "1"})
    except NotFound:
        raise ValidationFailed.on(
            "watch_tenants",
            "the cluster does not serve Tenant custom resources: install the CRDs first "
            "(kubectl apply -k deploy/kubernetes/crds)",
        ) from None


@transaction.atomic
def _save(actor: Actor, host_cluster: HostCluster, kubeconfig: str, found: ClusterDiscovery) -> HostCluster:
    host_cluster.kubeconfig_ciphertext = crypto.encrypt(kubeconfig)
    host_cluster.server_version = found.server_version
    host_cluster.api_server_cidrs = list(found.api_server_cidrs)
    host_cluster.discovered_at = timezone.now()
    host_cluster.save()
    imported, skipped = import_gpu_nodes(host_cluster, found.gpu_nodes)
    if skipped:
        host_cluster.status_message = f"GPU nodes with products not in the catalog were skipped: {skipped}"
        host_cluster.save(update_fields=["status_message"])
    audit.record(
        actor,
        "host_cluster.register",
        object_type="host_cluster",
        object_id=host_cluster.public_id,
        after={
            "name": host_cluster.name,
            "scheduler": host_cluster.scheduler,
            "server_version": found.server_version,
            "addons": found.addons,
            "api_server_cidrs": list(found.api_server_cidrs),
            "gpu_nodes": imported,
            "tenants_namespace": host_cluster.tenants_namespace,
        },
    )
    return host_cluster


def import_gpu_nodes(host_cluster: HostCluster, nodes: tuple[GpuNode, ...]) -> tuple[int, list[str]]:
    """Add the cluster's GPU nodes to the fleet (`clusters.node_sync`, which every pass runs again). Returns
    the number imported and the unknown products.

    CPU and memory are the node's allocatable (what it offers to pods, as the placement engine needs).
    Feature discovery does not label GPU UUIDs, so imported GPUs get stable placeholder UUIDs until DCGM
    reports the real ones.
    """
    synced = sync_nodes(host_cluster, nodes, audit_joins=False)
    return len(synced.joined), synced.skipped
