"""The audit log: append-only in the database, filtered and exported through the API."""

import csv
import io

import pytest
from django.db import DatabaseError, connection, transaction

from core.audit import Actor, record_download
from core.models import AuditEvent
from gpucloud.observability import RequestContext, reset_context, set_context
from tenants.services import lifecycle

needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the append-only trigger is PostgreSQL's (tests run on it)"
)


@needs_postgres
def test_the_database_refuses_to_update_or_delete_an_audit_row(people):
    event = AuditEvent.objects.filter(tenant=people["a"]).first()

    for attempt in (
        lambda: AuditEvent.objects.filter(pk=event.pk).update(action="nothing.happened"),
        lambda: AuditEvent.objects.filter(pk=event.pk).delete(),
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            attempt()
    event.refresh_from_db()
    assert event.action != "nothing.happened"


def test_deleting_a_user_keeps_their_audit_rows(people):
    charlie = people["charlie"]
    lifecycle.update_tenant(actor=Actor.of(charlie), tenant=people["b"], display_name="B!")
    charlie.delete()

    row = AuditEvent.objects.get(action="tenant.update", tenant=people["b"])
    assert row.actor_label == "charlie"
    assert row.actor_id is not None


def test_a_download_is_recorded_with_address_and_user_agent(people):
    token = set_context(RequestContext(request_id="r1", source_ip="192.0.2.7", user_agent="kubectl/1.31"))
    try:
        record_download(Actor.of(people["alice"]), "kubeconfig", object_id="tenant-a", tenant=people["a"])
    finally:
        reset_context(token)

    row = AuditEvent.objects.get(action="kubeconfig.download")
    assert (row.source_ip, row.user_agent, row.actor_label) == ("192.0.2.7", "kubectl/1.31", "alice")


def test_the_audit_list_filters_by_tenant_actor_action_and_time(api, people):
    client = api(people["admin"])
    lifecycle.update_tenant(actor=Actor.of(people["alice"]), tenant=people["a"], display_name="Renamed")

    by_actor = client.get("/api/v1/audit-events/", {"actor": "alice", "action": "tenant.update"}).json()
    assert [e["tenant"] for e in by_actor["results"]] == ["tenant-a"]
    assert (
        client.get("/api/v1/audit-events/", {"tenant": "tenant-b", "action": "tenant.update"}).json()["count"]
        == 0
    )
    assert client.get("/api/v1/audit-events/", {"since": "2999-01-01T00:00:00Z"}).json()["count"] == 0


def test_the_audit_log_exports_as_csv_with_the_same_filters(api, people):
    response = api(people["alice"]).get("/api/v1/audit-events/export/", {"tenant": "tenant-a"})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows
    assert {r["tenant"] for r in rows} == {"tenant-a"}
    assert {"member.add", "tenant.create"} <= {r["action"] for r in rows}
