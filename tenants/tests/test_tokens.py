from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from core.audit import Actor
from core.models import AuditEvent
from tenants.models import ApiToken
from tenants.tokens import authenticate, create_token


def test_a_token_is_stored_only_as_prefix_and_hmac(make_user):
    row, token = create_token(actor=Actor.system("t"), user=make_user("alice"), name="laptop")

    assert token.startswith("gpc_")
    assert len(token) == 44
    assert token not in (row.digest, row.prefix)
    assert token[4:12] == row.prefix
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tenants_apitoken")
        assert all(token[12:] not in str(value) for value in cursor.fetchone())
    assert AuditEvent.objects.get(action="token.create").after["prefix"] == row.prefix


def test_a_wrong_revoked_or_expired_token_is_refused(make_user):
    row, token = create_token(actor=Actor.system("t"), user=make_user("alice"), name="laptop")
    assert authenticate(token) == row
    assert authenticate(token[:-1] + ("a" if token[-1] != "a" else "b")) is None

    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate(token) is None
    ApiToken.objects.filter(pk=row.pk).update(expires_at=None, revoked_at=timezone.now())
    assert authenticate(token) is None


def test_the_api_answers_401_problem_for_a_bad_token(api, make_user, demo_fleet):
    client = api(None)
    client.credentials(HTTP_AUTHORIZATION="Bearer gpc_nonsense")
    response = client.get("/api/v1/tenants/")

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == "the bearer token is not a gpucloud token (gpc_…)"


def test_create_token_prints_a_working_token(make_user, api, demo_fleet):
    make_user("alice")
    out = StringIO()
    call_command("create_token", "--user", "alice", "--name", "ci", stdout=out)
    token = out.getvalue().strip()

    assert authenticate(token).name == "ci"
