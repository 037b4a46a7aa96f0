"""Data migrations of gitops, run forwards on the real database."""

from __future__ import annotations

BEFORE, AFTER = ("gitops", "0001_manifests_gitops"), ("gitops", "0002_h24_ownership_webhooks")


def test_claims_made_without_any_check_are_released(migrate):
    old = migrate(BEFORE)
    old.get_model("gitops", "GitSource").objects.create(name="platform", url="https://git.example.com/p.git")
    rows = old.get_model("gitops", "ManagedObject").objects
    for kind, name, source in [
        ("Tenant", "delta", "api"),  # every /apply/ without a source, whoever called
        ("Tenant", "bravo", "gitops:ghost"),  # a GitOps source that does not exist
        ("Tenant", "vision", "gitops:platform"),
        ("HostCluster", "demo", "file:/srv/platform"),
    ]:
        rows.create(kind=kind, name=name, source=source)

    new = migrate(AFTER)

    kept = new.get_model("gitops", "ManagedObject").objects.values_list("name", "source")
    assert sorted(kept) == [("demo", "file:/srv/platform"), ("vision", "gitops:platform")]
