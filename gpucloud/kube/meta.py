"""Ownership labels and the spec-hash annotation every rendered object carries."""

from __future__ import annotations

import hashlib
import json
from typing import Any

Manifest = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpucloud"
TENANT = "gpucloud.io/tenant"
TRUST_TIER = "gpucloud.io/trust-tier"
SPEC_HASH = "gpucloud.io/spec-hash"
# Objects several tenants need (ResourceFlavors, Cohorts, parent queues…) carry this tenant label value.
# It contains a dot, which a tenant slug (a DNS label) never does, so it can never name a tenant.
SHARED = "gpucloud.shared"
# On a host node, the same key as a label and a `NoSchedule` taint means "dedicated to this tenant" (an
# isolated tenant's node; docs/kubernetes.md, "Dedicated nodes").
DEDICATED_TO = "gpucloud.io/tenant"


def spec_hash(manifest: Manifest) -> str:
    """A stable hash of everything gpucloud sets on an object, except the hash itself."""
    meta = manifest.get("metadata", {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != SPEC_HASH}
    body = {**manifest, "metadata": {**meta, "annotations": annotations}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def owned(manifest: Manifest, tenant: str) -> Manifest:
    """Add the ownership labels and the spec-hash annotation to a manifest (returns it)."""
    meta = manifest.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({MANAGED_BY: MANAGER, TENANT: tenant})
    meta.setdefault("annotations", {})
    meta["annotations"][SPEC_HASH] = spec_hash(manifest)
    return manifest


def obj(api_version: str, kind: str, name: str, namespace: str | None = None, **body: Any) -> Manifest:
    """A bare manifest; `owned` finishes it."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}
