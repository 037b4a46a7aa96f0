"""`?dry_run=true`: the write runs in full and is rolled back, so the answer is the real one and nothing stays
(Terraform's plan asks this way)."""

from __future__ import annotations

from typing import Any

from core.models import AuditEvent
from tenants.models import ApiToken, Membership, Quota, Tenant


def test_a_dry_run_quota_over_capacity_gets_the_same_refusal_as_the_write(
    api: Any, admin: Any, make_tenant: Any
):
    make_tenant("vision")
    client = api(admin)
    url = "/api/v1/tenants/vision/quotas/h200-141gb/"
    dry = client.put(f"{url}?dry_run=true", {"guaranteed": 100}, format="json")
    real = client.put(url, {"guaranteed": 100}, format="json")
    assert dry.status_code == real.status_code == 422
    assert dry.json() == real.json()
    assert dry.json()["type"] == "/problems/quota-exceeds-capacity"


def test_a_dry_run_that_would_succeed_answers_as_the_write_and_leaves_nothing(
    api: Any, admin: Any, make_tenant: Any, make_user: Any, django_capture_on_commit_callbacks: Any
):
    make_tenant("vision")
    make_user("alice")
    client = api(admin)
    audited = AuditEvent.objects.count()
    with django_capture_on_commit_callbacks() as enqueued:
        quota = client.put(
            "/api/v1/tenants/vision/quotas/h200-141gb/?dry_run=1", {"guaranteed": 8}, format="json"
        )
        member = client.post(
            "/api/v1/tenants/vision/members/?dry_run=true",
            {"username": "alice", "role": "owner"},
            format="json",
        )
        tenant = client.post("/api/v1/tenants/?dry_run=true", {"slug": "nlp"}, format="json")
        renamed = client.patch("/api/v1/tenants/vision/?dry_run=true", {"display_name": "V"}, format="json")
    assert (quota.status_code, quota.json()["guaranteed"], quota["Dry-Run"]) == (201, 8, "true")
    assert (member.status_code, member.json()["role"]) == (201, "owner")
    assert (tenant.status_code, tenant.json()["slug"], renamed.json()["display_name"]) == (201, "nlp", "V")
    assert not Quota.objects.exists()
    assert not Membership.objects.filter(user__username="alice").exists()
    assert not Tenant.objects.filter(slug="nlp").exists()
    assert Tenant.objects.get(slug="vision").display_name != "V"
    assert AuditEvent.objects.count() == audited
    assert enqueued == []  # no audit row, no reconcile task
    # The write itself still works, and is the first one.
    assert (
        client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json").status_code
        == 201
    )


def test_a_dry_run_where_none_is_offered_is_refused_and_writes_nothing(api: Any, admin: Any):
    client = api(admin)
    refused = client.post("/api/v1/tokens/?dry_run=true", {"name": "ci"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == {"dry_run": ["not offered here"]}
    assert not ApiToken.objects.filter(name="ci").exists()


def test_a_dry_run_value_that_is_not_true_is_refused(api: Any, admin: Any, make_tenant: Any):
    make_tenant("vision")
    refused = api(admin).put(
        "/api/v1/tenants/vision/quotas/h200-141gb/?dry_run=maybe", {"guaranteed": 1}, format="json"
    )
    assert refused.status_code == 400
    assert "dry_run must be true or 1, not 'maybe'" in refused.json()["detail"]
    assert not Quota.objects.exists()


def test_a_stranger_asking_for_a_dry_run_is_told_to_sign_in_first(api: Any, make_tenant: Any):
    make_tenant("vision")
    refused = api(None).put("/api/v1/tenants/vision/quotas/h200-141gb/?dry_run=maybe", {"guaranteed": 1})
    assert refused.status_code == 401
