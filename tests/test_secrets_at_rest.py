"""The database holds no token secret, no kubeconfig and no webhook URL in clear text: every column of every
table is read."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from tests.kube_emulator import start_emulator

KUBECONFIG_SIGNS = re.compile(
    r"apiVersion|clusters:|client-key-data|client-certificate-data|BEGIN [A-Z ]*KEY"
)


def every_value() -> dict[tuple[str, str], list[str]]:
    """{(table, column): [each value as text]} for the whole database."""
    found: dict[tuple[str, str], list[str]] = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [c[0] for c in cursor.description]
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    if value is not None:
                        found.setdefault((table, column), []).append(str(value))
    return found


def test_no_token_secret_is_stored_anywhere(api, people):
    alice = api(people["alice"])
    refused = alice.post("/api/v1/tokens/", {"name": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert refused.status_code == 400  # a replayable answer would have to store the secret
    personal = alice.post("/api/v1/tokens/", {"name": "laptop"}, format="json").json()
    service = alice.post("/api/v1/tenants/tenant-a/tokens/", {"name": "gitops"}, format="json").json()
    for created in (personal, service):
        alice.credentials(HTTP_AUTHORIZATION=f"Bearer {created['token']}")
        assert alice.get("/api/v1/tenants/").status_code == 200  # used once: last-use rows written too

    values = every_value()
    text = "\n".join(v for column in values.values() for v in column)
    for created in (personal, service):
        assert created["prefix"] in text  # the scan does read the token table
        secret = created["token"][len("gpc_") + 8 :]
        assert created["token"] not in text
        assert secret not in text


@pytest.fixture
def registered_host_cluster(api, admin, gpu_catalog):
    """A Kubernetes host cluster registered through the API (its API server is the emulator)."""
    emulator = start_emulator(crds=("kueue", "flux"))
    try:
        body = {"name": "gpu-east", "kubeconfig": KUBECONFIG.format(url=emulator.url), "scheduler": "kueue"}
        response = api(admin).post("/api/v1/host-clusters/", body, format="json")
        assert response.status_code == 201, response.json()
        yield
    finally:
        emulator.stop()


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: host
clusters: [{{name: host, cluster: {{server: "{url}"}}}}]
users: [{{name: admin, user: {{token: host-admin-secret-token}}}}]
contexts: [{{name: host, context: {{cluster: host, user: admin}}}}]
"""


def test_no_kubeconfig_column_holds_a_kubeconfig_in_clear_text(registered_host_cluster):
    values = every_value()
    text = "\n".join(v for column in values.values() for v in column)
    assert "host-admin-secret-token" not in text
    kubeconfig_columns = {key: v for key, v in values.items() if "kubeconfig" in key[1].lower()}
    assert any(v for v in kubeconfig_columns.values()), "the scan found no stored kubeconfig to check"
    for (table, column), column_values in kubeconfig_columns.items():
        for value in column_values:
            assert not KUBECONFIG_SIGNS.search(value), f"{table}.{column} holds a kubeconfig in clear text"
    assert not any(
        KUBECONFIG_SIGNS.search(v) and "client-key-data" in v for column in values.values() for v in column
    ), "a kubeconfig with a client key is stored in clear text somewhere"


def test_no_column_holds_a_budget_webhook_url_in_clear_text(api, people):
    url = "https://93.184.215.14/services/T0001/B0002/webhook-secret-7f3a9c"
    answer = api(people["alice"]).post(
        "/api/v1/budgets/",
        {"tenant": "tenant-a", "monthly_amount": "100", "webhook_url": url},
        format="json",
        HTTP_IDEMPOTENCY_KEY="budget-1",  # the stored answer must not hold the URL either
    )
    assert answer.status_code == 201, answer.json()

    values = every_value()
    text = "\n".join(v for column in values.values() for v in column)
    assert "webhook-secret-7f3a9c" not in text
    assert "T0001/B0002" not in text
    webhook_columns = [v for key, v in values.items() if "webhook" in key[1].lower()]
    assert any(webhook_columns), "the scan found no stored webhook to check"


def test_no_column_holds_a_gitops_password_or_webhook_secret_in_clear_text(api, admin, settings):
    body = {
        "name": "platform",
        "url": "https://git.example.com/platform.git",
        "username": "deploy",
        "password": "gitops-token-5d1e77",
        "webhook_secret": "hook-secret-9b2c41",
    }
    answer = api(admin).post("/api/v1/gitops/sources/", body, format="json", HTTP_IDEMPOTENCY_KEY="gitops-1")
    assert answer.status_code == 201, answer.json()
    assert "gitops-token-5d1e77" not in str(answer.json())
    assert "hook-secret-9b2c41" not in str(answer.json())

    values = every_value()
    text = "\n".join(v for column in values.values() for v in column)
    assert "gitops-token-5d1e77" not in text
    assert "hook-secret-9b2c41" not in text
    sealed = [v for key, v in values.items() if key[0] == "gitops_gitsource" and "ciphertext" in key[1]]
    assert len(sealed) == 2, "the scan found no stored secret to check"
    assert all(column[0] for column in sealed), "the scan found no stored secret to check"
