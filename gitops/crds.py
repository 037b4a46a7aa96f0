"""CustomResourceDefinitions for `Tenant` and `RateCard`, derived from the manifests' JSON Schemas.

Argo CD and Flux users declare tenants as Kubernetes objects; a host cluster registered with
`--watch-tenants NAMESPACE` has them applied by `gitops.controller`. The CRDs' `openAPIV3Schema` is computed
here from `gitops.manifests.SCHEMAS`, so the API server, an editor and `apply` check the same shape; the
YAML under `deploy/kubernetes/crds/` is this module's output (`python manage.py crds --write`, and a test
fails when the two differ).

Kubernetes wants a *structural* schema (OpenAPI v3, every node typed, no `const`, no `null` type, no
`additionalProperties` beside `properties`: unknown fields are pruned, and refused by `kubectl`'s strict
field validation), so the JSON Schema is translated, not copied. Under `metadata` the API server allows a
schema for `name` and `generateName` only, and nothing else — not even `required: [name]` (it requires a
name itself): the manifest's rule for the name's shape is kept, the rest of its `metadata` schema is not.
`tests/apiextensions.py` (a port of the API server's CRD validation) checks the result in the tests.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gitops.manifests import API_VERSION, SCHEMAS

GROUP, VERSION = API_VERSION.split("/")
# The kinds Argo CD and Flux may declare. HostCluster is not one: registering a cluster needs credentials.
KINDS = {"Tenant": ("tenants", ["gputenant"]), "RateCard": ("ratecards", ["gpuratecard"])}
CRD_DIR = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes" / "crds"
DROPPED = ("$schema", "$id", "title")
_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """One JSON Schema (draft 2020-12) node as a structural OpenAPI v3 schema node."""
    node = {k: copy.deepcopy(v) for k, v in schema.items() if k not in DROPPED}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" in node and "type" not in node:
        node["type"] = _TYPES[type(node["enum"][0])]
    alternatives = node.get("anyOf", [])
    if "type" not in node and alternatives:
        # {anyOf: [X, {type: null}]} is X, nullable: the one JSON Schema idiom the manifests use for it.
        typed = [a for a in alternatives if a.get("type") != "null"]
        if len(typed) == 1 and len(typed) < len(alternatives):
            node.pop("anyOf")
            node.update(structural(typed[0]), nullable=True)
    if "properties" in node:
        node["properties"] = {k: structural(v) for k, v in node["properties"].items()}
        node.pop("additionalProperties", None)  # unknown fields are pruned (and refused by kubectl)
    elif isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = structural(node["additionalProperties"])
    if "items" in node:
        node["items"] = structural(node["items"])
    if not node.get("required", True):
        node.pop("required")
    return node


CONDITION = {
    "type": "object",
    "required": ["type", "status"],
    "properties": {
        "type": {"type": "string"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string"},
        "message": {"type": "string"},
        "observedGeneration": {"type": "integer", "format": "int64"},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
    },
}
STATUS = {
    "type": "object",
    "description": "Written by gpucloud: Ready (and Stalled, only while true), as kstatus, Flux and the "
    "Argo CD health check in docs/gitops.md read them.",
    "properties": {
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {
            "type": "array",
            "items": CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "tenantId": {"type": "string", "description": "the tenant's public id (Tenant only)"},
        "state": {"type": "string", "description": "the tenant's state (Tenant only)"},
    },
}


def open_api_schema(kind: str) -> dict[str, Any]:
    """The CRD's `openAPIV3Schema` for `kind`: the manifest's schema, plus the status gpucloud writes."""
    schema = structural(SCHEMAS[kind])
    schema["properties"]["apiVersion"] = {"type": "string"}  # the API server sets and checks these two
    schema["properties"]["kind"] = {"type": "string"}
    metadata = schema["properties"]["metadata"]["properties"]
    schema["properties"]["metadata"] = {
        "type": "object",
        "properties": {k: v for k, v in metadata.items() if k in ("name", "generateName")},
    }
    schema["properties"]["status"] = copy.deepcopy(STATUS)
    schema["required"] = ["spec"]
    return schema


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition of `kind` (namespaced, with the status subresource)."""
    plural, short = KINDS[kind]
    columns = [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "gpucloud"},
            "annotations": {"gpucloud.io/generated-by": "python manage.py crds --write"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["gpucloud"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": open_api_schema(kind)},
                }
            ],
        },
    }


def files() -> dict[str, str]:
    """{file name under deploy/kubernetes/crds/: its YAML}: one file per CRD."""
    header = "# Generated from gitops/manifests.py by `python manage.py crds --write`; do not edit.\n"
    return {
        f"{KINDS[kind][0]}.{GROUP}.yaml": header + yaml.safe_dump(crd(kind), sort_keys=False, width=100)
        for kind in KINDS
    }
