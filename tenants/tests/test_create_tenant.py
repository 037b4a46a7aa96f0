import pytest

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants.models import Membership, Tenant, TenantCluster
from tenants.services import lifecycle


def test_it_creates_a_pending_tenant_with_its_cluster_owner_and_audit_row(admin, demo_fleet):
    tenant = lifecycle.create_tenant(actor=Actor.of(admin), slug="vision", display_name="Vision team")

    assert tenant.public_id.startswith("ten_")
    assert tenant.state == Tenant.State.PENDING
    assert tenant.cluster.namespace == "tenant-vision"
    assert tenant.cluster.host_cluster == demo_fleet
    assert Membership.objects.get(tenant=tenant).role == "owner"
    event = AuditEvent.objects.get(action="tenant.create")
    assert event.after["slug"] == "vision"
    assert event.actor == admin


@pytest.mark.parametrize("slug", ["Vision", "-vision", "vision-", "9lives", "a" * 41, "vi_sion", ""])
def test_it_refuses_a_slug_that_is_not_dns_safe(admin, demo_fleet, slug):
    with pytest.raises(ValidationFailed) as refusal:
        lifecycle.create_tenant(actor=Actor.of(admin), slug=slug)

    assert "slug" in refusal.value.errors
    assert Tenant.objects.count() == 0
    assert TenantCluster.objects.count() == 0


def test_it_refuses_a_duplicate_slug_even_of_a_deleted_tenant(admin, make_tenant):
    tenant = make_tenant("vision")
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)

    with pytest.raises(Conflict, match="taken"):
        lifecycle.create_tenant(actor=Actor.of(admin), slug="vision")


def test_it_refuses_an_unknown_trust_tier_and_names_the_allowed_ones(admin, demo_fleet):
    with pytest.raises(ValidationFailed, match="isolated, standard, trusted"):
        lifecycle.create_tenant(actor=Actor.of(admin), slug="vision", trust_tier="paranoid")


def test_only_platform_administrators_create_tenants(make_user, demo_fleet):
    with pytest.raises(PermissionDenied):
        lifecycle.create_tenant(actor=Actor.of(make_user("alice")), slug="vision")
    assert not Tenant.objects.exists()
