"""Who may do what inside a tenant's vCluster: RBAC objects applied through the vCluster's own API.

Two setups (docs/kubernetes.md, "Cluster access"):

- `oidc`: the vCluster's API server trusts gpucloud's OpenID provider. The tenant groups
  (`gpucloud:<tenant>:<role>`, prefixed) are bound to ClusterRoles, and so is each person with a manual
  membership, by their user name at the provider (prefixed).
- `serviceaccounts`: no provider. Each person gets a ServiceAccount of their own in `gpucloud-access`, bound
  to the ClusterRole of their role; kubeconfigs carry short-lived tokens of it (TokenRequest). Deleting the
  ServiceAccount invalidates every token issued for it.

Owners and admins get `cluster-admin`, members `edit`, viewers `view`; billing gets nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Literal

from gpucloud.kube.meta import Manifest, obj, owned

RBAC = "rbac.authorization.k8s.io/v1"
ACCESS_NAMESPACE = "gpucloud-access"
CLUSTER_ROLES = {"owner": "cluster-admin", "admin": "cluster-admin", "member": "edit", "viewer": "view"}
GROUP_BINDING_PREFIX = "gpucloud-group-"
USER_BINDING_PREFIX = "gpucloud-user-"
SA_BINDING_PREFIX = "gpucloud-sa-"
USERNAME = "gpucloud.io/username"

Mode = Literal["oidc", "serviceaccounts"]


@dataclass(frozen=True)
class Person:
    """One person's access: `name` is DNS-safe and stable (`account_name`), `subject` their user name at the
    OpenID provider (without prefix; empty when unknown or when the membership comes from a group)."""

    name: str
    username: str
    role: str
    subject: str = ""


@dataclass(frozen=True)
class AccessSpec:
    """Everything that decides the RBAC objects inside one tenant's vCluster."""

    tenant: str
    mode: Mode
    people: tuple[Person, ...] = ()
    group_pattern: str = "gpucloud:{tenant}:{role}"
    prefix: str = "oidc:"

    def group(self, role: str) -> str:
        """The Kubernetes group name of a tenant role, as the API server sees it (with prefix)."""
        return self.prefix + self.group_pattern.format(tenant=self.tenant, role=role)

    def digest(self) -> str:
        """A hash of the desired access: the reconciler stores it once the cluster reflects it."""
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def account_name(user_id: int, username: str) -> str:
    """A DNS label for a person: readable, and unique through the user id."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", username.lower()).strip("-")[:40].strip("-")
    return f"u{user_id}-{cleaned}" if cleaned else f"u{user_id}"


def service_account_user(name: str) -> str:
    """The user name Kubernetes gives a token of the person's ServiceAccount."""
    return f"system:serviceaccount:{ACCESS_NAMESPACE}:{name}"


def _binding(name: str, role: str, subject: dict[str, str], tenant: str, username: str = "") -> Manifest:
    binding = obj(
        RBAC,
        "ClusterRoleBinding",
        name,
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLES[role]},
        subjects=[subject],
    )
    if username:
        binding["metadata"]["annotations"] = {USERNAME: username}
    return owned(binding, tenant)


def _oidc(spec: AccessSpec) -> list[Manifest]:
    objects = [
        _binding(
            GROUP_BINDING_PREFIX + role,
            role,
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": spec.group(role)},
            spec.tenant,
        )
        for role in CLUSTER_ROLES
    ]
    for person in spec.people:
        if person.subject and person.role in CLUSTER_ROLES:
            subject = {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "User",
                "name": spec.prefix + person.subject,
            }
            objects.append(
                _binding(
                    USER_BINDING_PREFIX + person.name, person.role, subject, spec.tenant, person.username
                )
            )
    return objects


def _service_accounts(spec: AccessSpec) -> list[Manifest]:
    objects = [owned(obj("v1", "Namespace", ACCESS_NAMESPACE), spec.tenant)]
    for person in spec.people:
        if person.role not in CLUSTER_ROLES:
            continue
        account = obj("v1", "ServiceAccount", person.name, ACCESS_NAMESPACE)
        account["metadata"]["annotations"] = {USERNAME: person.username}
        objects.append(owned(account, spec.tenant))
        subject = {"kind": "ServiceAccount", "name": person.name, "namespace": ACCESS_NAMESPACE}
        objects.append(
            _binding(SA_BINDING_PREFIX + person.name, person.role, subject, spec.tenant, person.username)
        )
    return objects


def render_access(spec: AccessSpec) -> list[Manifest]:
    """The RBAC objects (and ServiceAccounts) inside the vCluster, namespace first."""
    return _oidc(spec) if spec.mode == "oidc" else _service_accounts(spec)
