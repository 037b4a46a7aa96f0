"""Schemathesis against the generated OpenAPI schema: no 5xx, and every answer matches the schema.

Bounded so it runs in `make test`: a few examples per operation, derandomized (the same cases every run),
each in a savepoint rolled back afterwards so every case starts from the same tenants.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tenants.audit import Actor
from tenants.tokens import create_token

EXAMPLES_PER_OPERATION = 8
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


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


def test_the_api_gives_no_5xx_and_only_answers_its_schema_allows(schema, people):
    _, token = create_token(actor=Actor.system("fuzz"), user=people["alice"], name="fuzz", scope="admin")
    headers = {"Authorization": f"Bearer {token}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    cases = 0

    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case):
            nonlocal cases
            cases += 1
            savepoint = transaction.savepoint()
            try:
                response = case.call(headers=headers)
                case.validate_response(response, checks=CHECKS)
            finally:
                transaction.savepoint_rollback(savepoint)

        check()
    assert cases >= 200
