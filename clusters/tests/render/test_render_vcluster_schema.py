"""The rendered vcluster.yaml against the vCluster chart's own values.schema.json (vcluster/README.md): every
key gpucloud sets must be one the pinned chart knows, where the chart expects it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from clusters.render import ClusterProfile
from clusters.render.profile import OidcSettings
from clusters.render.vcluster import render_values, render_vcluster

SCHEMA = Path(__file__).parent / "vcluster" / "values.schema.json"
OIDC = OidcSettings(issuer="https://id.example.com", client_id="gpucloud")


@cache
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def problems(values: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(values)]


PROFILES = {
    "kueue": ClusterProfile(),
    "kueue-dra": ClusterProfile(dra=True),
    "kai-dra-oidc": ClusterProfile(scheduler="kai", dra=True, oidc=OIDC, sleep_after_inactivity="2h"),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("tier", ["isolated", "standard"])
def test_rendered_values_match_the_charts_schema(make_tenant, name: str, tier: str) -> None:
    values = render_values(make_tenant(trust_tier=tier), PROFILES[name])
    assert problems(values) == []


def test_a_suspended_tenant_without_dra_classes_matches_the_schema(make_tenant) -> None:
    tenant = make_tenant(desired="suspended", quotas=())
    assert problems(render_values(tenant, ClusterProfile(dra=True))) == []


def test_the_platform_instances_inline_values_match_the_schema(make_tenant) -> None:
    profile = ClusterProfile(vcluster_mode="platform", dra=True, platform_cluster="east")
    (instance,) = render_vcluster(make_tenant(), profile)
    values = yaml.safe_load(instance["spec"]["template"]["helmRelease"]["values"])
    assert problems(values) == []


def test_the_schema_refuses_a_misplaced_dra_key(make_tenant) -> None:
    """The check can fail: DeviceClasses sync from the host, never to it."""
    values = render_values(make_tenant(), ClusterProfile(dra=True))
    values["sync"]["toHost"]["deviceClasses"] = {"enabled": True}
    assert any("deviceClasses" in problem for problem in problems(values))
