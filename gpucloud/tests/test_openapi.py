"""The OpenAPI contract: it validates, and every list endpoint is paginated."""

import yaml
from openapi_spec_validator import validate


def schema(client, admin):
    client.force_login(admin)
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_the_schema_is_valid_openapi_3(client, admin):
    document = schema(client, admin)
    assert document["openapi"].startswith("3.")
    validate(document)


def test_every_list_endpoint_is_paginated(client, admin):
    document = schema(client, admin)
    lists = 0
    for path, operations in document["paths"].items():
        get = operations.get("get")
        if not get or not get["operationId"].endswith("_list"):
            continue
        if "application/json" not in get["responses"]["200"]["content"]:
            continue  # an export (CSV) is one document, not a page
        lists += 1
        names = {p["name"] for p in get.get("parameters", [])}
        assert {"limit", "offset"} <= names, path
        body = get["responses"]["200"]["content"]["application/json"]["schema"]
        assert body["$ref"].split("/")[-1].startswith("Paginated"), path
    assert lists >= 7


def test_the_docs_page_is_served(client, admin):
    client.force_login(admin)
    assert client.get("/api/docs/").status_code == 200


def test_dry_run_is_documented_on_the_writes_that_offer_it_and_nowhere_else(client, admin):
    paths = schema(client, admin)["paths"]

    def offers(path, method):
        return "dry_run" in {p["name"] for p in paths[path][method].get("parameters", [])}

    assert offers("/api/v1/tenants/{tenant_slug}/quotas/{gpu_class}/", "put")
    assert offers("/api/v1/tenants/", "post")
    assert offers("/api/v1/tenants/{tenant_slug}/members/", "post")
    assert not offers("/api/v1/tenants/", "get")
    assert not offers("/api/v1/tokens/", "post")


def test_every_write_documents_the_busy_answer_a_lost_lock_conflict_gives(client, admin):
    writes = [
        (path, method, operation)
        for path, operations in schema(client, admin)["paths"].items()
        for method, operation in operations.items()
        if method in ("post", "put", "patch", "delete")
    ]
    assert writes
    undocumented = [f"{method.upper()} {path}" for path, method, op in writes if "503" not in op["responses"]]
    assert undocumented == []
