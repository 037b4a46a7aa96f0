"""Schemathesis against the generated OpenAPI schema, on PostgreSQL: no 5xx, every answer as the schema says.

Three passes over every operation. The first is schema-driven: cases the schema allows. The second is
hostile: one schema-driven case per operation, then every slot of it (each path and query parameter, each
body property, the Idempotency-Key header) replaced in turn by each of HOSTILE — NUL bytes, long strings,
integers beyond any column, JSON deeper than the parser takes. The third sends a body nested 100,000 deep to
every operation that takes one. Each pass is bounded so it runs in `make test`: derandomized (the same cases
every run), each request in a savepoint rolled back afterwards so every case starts from the same tenants.
"""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from core.audit import Actor
from tenants.tokens import create_token

EXAMPLES_PER_OPERATION = 8
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
HOSTILE: list[Any] = [
    "\x00",
    "tenant-a\x00",
    "x" * 5_000,  # past every varchar the models have
    "ab\n",
    2**31,  # one past a PostgreSQL integer column
    -(2**31) - 1,
    10**20,  # past a bigint too
    -1,
    json.loads("[" * 40 + "]" * 40),  # deeper than the parser takes
    {"\x00": "\x00"},
]
DEEP_JSON = "[" * 100_000
BOUND = settings(
    derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck), max_examples=1
)


@pytest.fixture
def schema(db):
    # As Django's test client does: a request must not close the connection that holds the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def headers(people):
    _, token = create_token(actor=Actor.system("fuzz"), user=people["alice"], name="fuzz", scope="admin")
    # The token endpoints are fuzzed here, not throttled (test_bad_input checks the throttle).
    with override_settings(GPUCLOUD_THROTTLE_RATES={"tokens": "100000/min"}):
        yield {"Authorization": f"Bearer {token}"}


def in_savepoint(call):
    savepoint = transaction.savepoint()
    try:
        return call()
    finally:
        transaction.savepoint_rollback(savepoint)


def test_the_api_gives_no_5xx_and_only_answers_its_schema_allows(schema, headers):
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    cases = 0

    for operation in operations:

        @settings(BOUND, max_examples=EXAMPLES_PER_OPERATION)
        @given(case=operation.as_strategy())
        def check(case):
            nonlocal cases
            cases += 1
            in_savepoint(lambda: case.validate_response(case.call(headers=headers), checks=CHECKS))

        check()
    assert cases >= 200


def test_hostile_input_in_every_slot_is_a_4xx_never_a_5xx(schema, headers):
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    kinds: set[str] = set()

    for operation in operations:
        properties = body_properties(schema.raw_schema, operation.path, operation.method)

        @settings(BOUND)
        @given(case=operation.as_strategy(), properties=st.just(properties))
        def check(case, properties):
            # Every slot of one schema-driven case, each with every hostile value in turn.
            original = (dict(case.path_parameters or {}), dict(case.query or {}), case.body, case.media_type)
            for where in slots(case, properties):
                kinds.add(where.split(":")[0])
                for value in HOSTILE:
                    case.path_parameters, case.query = dict(original[0]), dict(original[1])
                    case.body, case.media_type = copy.deepcopy(original[2]), original[3]
                    extra = dict(headers)
                    put(case, where, value, extra)
                    status = in_savepoint(lambda: case.call(headers=extra)).status_code  # noqa: B023
                    if status >= 500:
                        failures.append(f"{case.operation.label} {where}={value!r:.60}: {status}")

        check()
    assert kinds == {"path", "query", "body", "header"}
    assert not failures, "\n".join(failures)


def test_bodies_nested_100000_deep_are_refused_by_every_operation_that_takes_a_body(schema, headers):
    operations = [result.ok() for result in schema.get_all_operations()]
    with_body = [operation for operation in operations if operation.method in ("post", "put", "patch")]
    assert len(with_body) >= 10

    for operation in with_body:

        @settings(BOUND)
        @given(case=operation.as_strategy())
        def check(case):
            case.media_type = "application/json"
            response = in_savepoint(lambda: case.call(headers=headers, data=DEEP_JSON))
            assert 400 <= response.status_code < 500, f"{case.operation.label}: {response.status_code}"

        check()


def body_properties(raw: dict[str, Any], path: str, method: str) -> list[str]:
    """The JSON body's top-level property names, from the schema (generated cases may omit optional ones)."""
    body = raw["paths"][path][method].get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = body.get("schema", {}).get("$ref", "")
    return list(raw["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {}).get("properties", {}))


def slots(case: Any, properties: list[str]) -> list[str]:
    """Where a hostile value can go: path and query parameters, body properties, the Idempotency-Key."""
    found = [f"path:{name}" for name in case.path_parameters or {}]
    found += [f"query:{parameter.name}" for parameter in case.operation.query]
    found += [f"body:{name}" for name in properties or (case.body if isinstance(case.body, dict) else {})]
    if case.method.upper() == "POST":
        found.append("header:Idempotency-Key")
    return found


def put(case: Any, where: str, value: Any, headers: dict[str, str]) -> None:
    kind, name = where.split(":", 1)
    text = value if isinstance(value, str) else json.dumps(value)
    if kind == "path":
        case.path_parameters[name] = quote(text, safe="")
    elif kind == "query":
        case.query = {**(case.query or {}), name: text}
    elif kind == "body":
        case.body = {**(case.body if isinstance(case.body, dict) else {}), name: value}
        case.media_type = "application/json"
    else:
        headers[name] = text.replace("\n", " ")  # a header cannot hold a newline at all
