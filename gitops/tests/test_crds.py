"""The Tenant and RateCard CRDs: generated from the manifests' JSON Schemas, committed as generated, accepted
by the API server's own rules (tests/apiextensions.py, a port of them) and by the CustomResourceDefinition
schema (kubernetes-validate), and accepting (and refusing) what the JSON Schemas accept (and refuse)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.core.management import call_command
from openapi_schema_validator import OAS30Validator

from gitops.crds import CRD_DIR, KINDS, crd, files
from gitops.manifests import SCHEMAS, VALIDATORS
from tests.apiextensions import refusals
from tests.tools import KUBERNETES_VERSIONS, unavailable

KUBERNETES_VERSION = kubernetes_validate.latest_version()  # the newest Kubernetes whose schemas it ships

TENANT = {
    "apiVersion": "gpucloud.io/v1alpha1",
    "kind": "Tenant",
    "metadata": {"name": "vision"},
    "spec": {
        "displayName": "Vision Team",
        "trustTier": "standard",
        "members": [{"user": "alice", "role": "owner"}, {"user": "new@example.com", "role": "member"}],
        "quotas": [
            {"gpuClass": "h200-141gb", "guaranteed": 8, "burst": 8, "lendable": None, "weight": 1},
            {"gpuClass": "h200-141gb.mig-1g.18gb", "guaranteed": 14},
        ],
        "budget": {"monthly": "20000.00", "currency": "USD", "email": ""},
        "sleep": {"whenIdle": True, "afterInactivity": "1h30m"},
    },
}
BAD_SPECS = [
    {"trustTier": "paranoid"},
    {"members": [{"user": "not a user!", "role": "owner"}]},
    {"members": [{"user": "alice", "role": "emperor"}]},
    {"quotas": [{"gpuClass": "h200-141gb", "guaranteed": -1}]},
    {"quotas": [{"gpuClass": "h200-141gb"}]},
    {"budget": {"monthly": "lots"}},
    {"displayName": ""},
    {"sleep": {"afterInactivity": "4 hours"}},
    {"sleep": {"whenIdle": "yes"}},
]


def openapi_validator(kind: str) -> OAS30Validator:
    return OAS30Validator(crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_the_committed_crds_are_the_generated_ones():
    committed = {p.name: p.read_text() for p in CRD_DIR.glob("*.gpucloud.io.yaml")}
    assert committed == files(), "run `python manage.py crds --write` and commit deploy/kubernetes/crds/"


def test_the_crds_command_prints_what_it_writes():
    out = io.StringIO()
    call_command("crds", stdout=out)
    printed = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    assert printed == [crd(kind) for kind in KINDS]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_crd_is_namespaced_with_a_status_subresource_and_what_the_api_server_accepts(kind):
    definition = crd(kind)
    (version,) = definition["spec"]["versions"]
    assert (definition["spec"]["group"], version["name"]) == ("gpucloud.io", "v1alpha1")
    assert definition["spec"]["scope"] == "Namespaced"
    assert version["subresources"] == {"status": {}}
    assert (
        refusals(definition) == []
    )  # the API server's own rules (structural schema, metadata, x-kubernetes-*)
    for version in (*KUBERNETES_VERSIONS, KUBERNETES_VERSION):  # the CRD object's own schema
        kubernetes_validate.validate(definition, version, strict=True)


def test_the_name_rule_stays_and_nothing_else_is_said_about_metadata():
    for kind in KINDS:
        schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema["properties"]["metadata"] == {
            "type": "object",
            "properties": {"name": SCHEMAS[kind]["properties"]["metadata"]["properties"]["name"]},
        }


def test_the_crd_schema_has_every_field_of_the_manifest_schema():
    for kind in KINDS:
        spec = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert set(spec["properties"]) == set(SCHEMAS[kind]["properties"]["spec"]["properties"])
        assert spec.get("required", []) == SCHEMAS[kind]["properties"]["spec"]["required"]


def test_the_api_server_and_apply_accept_the_same_tenant():
    assert not list(VALIDATORS["Tenant"].iter_errors(TENANT))
    assert not list(openapi_validator("Tenant").iter_errors(TENANT))


@pytest.mark.parametrize("spec", BAD_SPECS, ids=[str(s) for s in BAD_SPECS])
def test_the_api_server_and_apply_refuse_the_same_bad_tenant(spec):
    document = {**TENANT, "spec": spec}
    assert list(VALIDATORS["Tenant"].iter_errors(document))
    assert list(openapi_validator("Tenant").iter_errors(document))


def kustomize(directory: Path) -> list[dict[str, Any]]:
    if not shutil.which("kubectl"):
        unavailable("kubectl is not installed")
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_crds_render_with_kustomize_and_the_base_includes_them():
    rendered = {(d["kind"], d["metadata"]["name"]) for d in kustomize(CRD_DIR)}
    assert ("CustomResourceDefinition", "tenants.gpucloud.io") in rendered
    assert ("CustomResourceDefinition", "ratecards.gpucloud.io") in rendered
    assert ("ClusterRole", "gpucloud-tenant-resources") in rendered


@pytest.mark.parametrize("directory", ["crds", "overlays/production", "overlays/quickstart"])
def test_every_crd_that_kubectl_apply_k_sends_is_one_the_api_server_accepts(directory):
    """`kubectl apply -k` of the CRDs alone or of an overlay: what Kustomize adds (labels) included."""
    rendered = [d for d in kustomize(CRD_DIR.parent / directory) if d["kind"] == "CustomResourceDefinition"]
    assert {d["metadata"]["name"] for d in rendered} == {"tenants.gpucloud.io", "ratecards.gpucloud.io"}
    for definition in rendered:
        assert refusals(definition) == [], definition["metadata"]["name"]
