"""People inside tenant clusters: the RBAC pass through each vCluster's API, and per-person credentials.

The memberships of a tenant decide the RBAC objects inside its vCluster (`clusters.render.access`). This
module reaches the vCluster's API with the admin kubeconfig vCluster writes into the `vc-<name>` secret on the
host, applies what is missing or changed and deletes what gpucloud made that is no longer wanted: the same
level-triggered pass as the host's, one list per kind and no writes when nothing changed. Each tenant cluster
records the hash of the access it reflects (`access_hash`) and when it was confirmed, so the tenant page can
say whether a change has reached the cluster yet.

Passes run after the host pass of a host cluster (`clusters.tasks`), for tenants whose memberships changed
(enqueued on commit by the membership services) or whose last check is older than CLUSTER_ACCESS_RESYNC.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import yaml
from django.conf import settings
from django.utils import timezone
from kubernetes import client

from clusters.drivers.in_sync import in_sync
from clusters.drivers.kubeconfig import read_admin_kubeconfig
from clusters.render.access import (
    ACCESS_NAMESPACE,
    CLUSTER_ROLES,
    AccessSpec,
    Person,
    account_name,
    render_access,
)
from fleet.clients import api_client_of
from fleet.models import HostCluster
from gpucloud.kube import kinds as k
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_from_kubeconfig
from gpucloud.kube.errors import DriverError, PermanentDriverError
from gpucloud.kube.meta import MANAGED_BY, MANAGER, TENANT, Manifest
from tenants.models import Identity, Membership, Tenant, TenantCluster

log = logging.getLogger(__name__)
SERVICE_ACCOUNT = k.Kind("v1", "ServiceAccount", "serviceaccounts", True)
CLUSTER_ROLE_BINDING = k.Kind(
    "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False
)
ACCESS_KINDS = (k.NAMESPACE, SERVICE_ACCOUNT, CLUSTER_ROLE_BINDING)  # apply order; pruning reverses it
_BY_KIND = {kind.kind: kind for kind in ACCESS_KINDS}
# The access pass and downloads answer within a request or a reconcile pass: try briefly.
ACCESS_RETRY = RetryPolicy(attempts=2, base_seconds=0.2, cap_seconds=1.0, timeout_seconds=5.0)


def cluster_mode() -> str:
    return "oidc" if settings.OIDC_ISSUER else "serviceaccounts"


def _subject(membership: Membership, identities: dict[int, str]) -> str:
    """The person's user name at the provider, as the API server reads it from their token."""
    if settings.OIDC_KUBERNETES_USERNAME_CLAIM == "email":
        return str(membership.user.email)
    return identities.get(membership.user_id, "")


def access_spec(tenant: Tenant) -> AccessSpec:
    """The desired access inside the tenant's vCluster, from its memberships now."""
    mode = cluster_mode()
    # A deactivated person holds nothing inside the cluster either (tenants.users.set_active).
    memberships = [
        m
        for m in tenant.memberships.select_related("user").order_by("user_id")
        if m.role in CLUSTER_ROLES and m.user.is_active
    ]
    identities: dict[int, str] = {}
    if mode == "oidc":
        # People in the tenant's groups are bound through the groups; people given a role by hand, by name.
        memberships = [m for m in memberships if m.source == Membership.Source.MANUAL]
        identities = dict(
            Identity.objects.filter(
                issuer=settings.OIDC_ISSUER, user_id__in=[m.user_id for m in memberships]
            ).values_list("user_id", "subject")
        )
    people = []
    for m in memberships:
        username = m.user.get_username()
        subject = _subject(m, identities) if mode == "oidc" else ""
        if mode == "oidc" and not subject:
            continue  # never signed in through the provider: nothing to bind yet
        people.append(Person(account_name(m.user_id, username), username, m.role, subject))
    return AccessSpec(
        tenant=tenant.slug,
        mode=mode,  # type: ignore[arg-type]
        people=tuple(people),
        group_pattern=settings.OIDC_TENANT_GROUP_PATTERN,
        prefix=settings.OIDC_KUBERNETES_PREFIX,
    )


# --- reaching the vCluster ------------------------------------------------------------------------------


def admin_kubeconfig_of(cluster: TenantCluster) -> str:
    host_client = api_client_of(cluster.host_cluster)
    try:
        return read_admin_kubeconfig(
            KubeApi(host_client, ACCESS_RETRY), cluster.namespace, cluster.tenant.slug
        )
    finally:
        host_client.close()


def vcluster_api(cluster: TenantCluster) -> KubeApi:
    """A client of the tenant's vCluster API with its admin credentials; close its `api_client` after use."""
    return KubeApi(api_client_from_kubeconfig(admin_kubeconfig_of(cluster)), ACCESS_RETRY)


def certificate_authority(kubeconfig: str) -> str:
    """The base64 CA bundle a kubeconfig names for its cluster (public; empty when it has none)."""
    document = yaml.safe_load(kubeconfig) or {}
    clusters = document.get("clusters") or [{}]
    return str((clusters[0].get("cluster") or {}).get("certificate-authority-data") or "")


# --- the access pass ------------------------------------------------------------------------------------


def _key(manifest: Manifest) -> tuple[str, str | None, str]:
    meta = manifest["metadata"]
    return (manifest["kind"], meta.get("namespace"), meta["name"])


def _path(manifest: Manifest) -> str:
    return _BY_KIND[manifest["kind"]].object_path(manifest)


def apply_access(api: KubeApi, spec: AccessSpec) -> int:
    """Make the vCluster hold exactly gpucloud's desired access objects for this tenant; returns writes."""
    selector = f"{MANAGED_BY}={MANAGER},{TENANT}={spec.tenant}"
    live: dict[tuple[str, str | None, str], Manifest] = {}
    for kind in ACCESS_KINDS:
        for item in api.get(kind.path(), {"labelSelector": selector}).get("items") or []:
            item.setdefault("kind", kind.kind)
            live[_key(item)] = item
    desired = {_key(m): m for m in render_access(spec)}
    writes = api.writes
    for key, manifest in desired.items():
        current = live.get(key)
        if current is None or current["metadata"].get("deletionTimestamp") or not in_sync(manifest, current):
            api.apply(_path(manifest), manifest)
    order = {kind.kind: i for i, kind in enumerate(ACCESS_KINDS)}
    doomed = sorted((key for key in live if key not in desired), key=lambda key: -order[key[0]])
    for key in doomed:
        if not live[key]["metadata"].get("deletionTimestamp"):
            api.delete(_path(live[key]))
    return api.writes - writes


def sync_access(tenant: Tenant) -> bool:
    """One access pass for a tenant whose cluster is ready; records the outcome on its cluster."""
    cluster = tenant.cluster
    # The generation is read before the memberships: a change committed in between is applied but not
    # counted, so the page errs on "not yet" and the next pass settles it.
    generation = Tenant.objects.filter(pk=tenant.pk).values_list("access_generation", flat=True).first()
    spec = access_spec(tenant)
    now = timezone.now()
    if cluster.host_cluster.driver == HostCluster.Driver.SIMULATED:
        return _record(cluster, spec.digest(), "", now, generation)  # nothing inside a simulated cluster
    try:
        api = vcluster_api(cluster)
        try:
            apply_access(api, spec)
        finally:
            api.api_client.close()
    except (DriverError, client.ApiException, ValueError) as exc:  # also a kubeconfig the client cannot use
        log.warning("cluster access not applied", extra={"tenant": tenant.slug, "error": str(exc)})
        _record(cluster, cluster.access_hash, f"cluster access not applied yet: {exc}", now, None)
        return False
    return _record(cluster, spec.digest(), "", now, generation)


def _record(cluster: TenantCluster, digest: str, message: str, now: Any, generation: int | None) -> bool:
    """Store the outcome: the attempt always, the applied hash and generation when they moved on."""
    fields: dict[str, Any] = {"access_attempted_at": now, "access_message": message}
    if generation is not None and (
        digest != cluster.access_hash
        or generation != cluster.access_synced_generation
        or cluster.access_synced_at is None
    ):
        fields.update(access_hash=digest, access_synced_at=now, access_synced_generation=generation)
    TenantCluster.objects.filter(pk=cluster.pk).update(**fields)
    for name, value in fields.items():
        setattr(cluster, name, value)
    return not message


def is_due(tenant: Tenant, now: Any = None) -> bool:
    """Whether the tenant's vCluster needs an access pass: a membership changed since the last one (at once,
    or CLUSTER_ACCESS_RETRY after a failed attempt), or its recheck is due (CLUSTER_ACCESS_RESYNC). Costs no
    query: the generations are on the tenant and cluster rows already read."""
    cluster = tenant.cluster
    if cluster.state != TenantCluster.State.READY:
        return False
    now = now or timezone.now()
    attempted = cluster.access_attempted_at
    if cluster.access_synced_at is None or cluster.access_synced_generation < tenant.access_generation:
        retry_at = attempted + timedelta(seconds=settings.CLUSTER_ACCESS_RETRY) if attempted else None
        return not cluster.access_message or retry_at is None or retry_at <= now
    if cluster.host_cluster.driver == HostCluster.Driver.SIMULATED:
        return False  # nothing inside to drift
    return attempted is None or attempted < now - timedelta(seconds=settings.CLUSTER_ACCESS_RESYNC)


def sync_due(tenants: Iterable[Tenant]) -> int:
    """Run the access pass for the given tenants that need one; returns how many were brought in line."""
    done = 0
    for tenant in tenants:
        if is_due(tenant):
            done += sync_access(tenant)
    return done


def tenants_of(host_cluster_id: int, tenant_ids: Iterable[int] | None = None) -> list[Tenant]:
    tenants = Tenant.objects.filter(
        cluster__host_cluster_id=host_cluster_id, cluster__state=TenantCluster.State.READY
    ).select_related("cluster__host_cluster")
    if tenant_ids is not None:
        tenants = tenants.filter(pk__in=list(tenant_ids))
    return list(tenants)


# --- credentials ----------------------------------------------------------------------------------------


def request_token(api: KubeApi, name: str, seconds: int) -> tuple[str, str]:
    """A token of the ServiceAccount `name` (TokenRequest), valid for `seconds`; returns it and its expiry."""
    path = SERVICE_ACCOUNT.path(ACCESS_NAMESPACE, name) + "/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    answer = api.request("POST", path, body=body, content_type="application/json")
    status = (answer or {}).get("status") or {}
    if not status.get("token"):
        raise PermanentDriverError(f"the TokenRequest for {name} returned no token")
    return status["token"], str(status.get("expirationTimestamp", ""))
