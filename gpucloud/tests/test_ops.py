from django.db import connection


def test_healthz_answers(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_the_database_and_broker(client, db):
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


def test_readyz_fails_when_the_database_is_unreachable(client, db):
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT="1")  # nothing listens on port 1
    else:
        connection.settings_dict.update(NAME="/nonexistent/dir/db.sqlite3")
    try:
        response = client.get("/readyz")
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert response.status_code == 503
    assert response.json()["checks"]["database"].startswith("unreachable")


def test_metrics_are_in_prometheus_format_and_count_requests(client, db):
    client.get("/healthz")
    body = client.get("/metrics").content.decode()
    assert "# TYPE gpucloud_http_requests_total counter" in body
    assert 'gpucloud_http_requests_total{method="GET",status="200",view="healthz"}' in body
    assert "gpucloud_reconcile_runs_total" in body or "gpucloud_reconcile_duration_seconds" in body


def test_every_response_carries_a_request_id(client):
    assert len(client.get("/healthz")["X-Request-ID"]) == 32
    assert client.get("/healthz", HTTP_X_REQUEST_ID="abc-123")["X-Request-ID"] == "abc-123"
