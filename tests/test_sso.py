"""Signing in through a real OpenID provider (npm oidc-provider), over plain HTTP against the live server."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlencode, urlsplit

import requests
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session

from core.audit import Actor
from core.models import AuditEvent
from tenants import invitations, sso, tokens
from tenants.models import Identity, Membership
from tenants.services import members
from tests.sso import ADMIN_GROUP, CLIENT_SECRET, follow_to_callback, sign_in


def roles(username):
    return {
        (m.tenant.slug, m.role, m.source)
        for m in Membership.objects.filter(user__username=username).select_related("tenant")
    }


def test_the_first_sign_in_creates_the_user_and_memberships_from_groups(
    sso_on, live_server, make_tenant, caplog
):
    make_tenant("vision"), make_tenant("speech")
    sso_on.person("ada", ["gpucloud:vision:owner", "gpucloud:speech:viewer", "gpucloud:ghost:owner", "misc"])

    with caplog.at_level(logging.DEBUG):
        _, page = sign_in(live_server.url, "ada")

    assert page.status_code == 200
    assert page.url == f"{live_server.url}/"
    assert "vision" in page.text
    assert "speech" in page.text
    ada = User.objects.get(username="ada")
    assert Identity.objects.get(user=ada).subject == "ada"
    assert not ada.has_usable_password()
    assert roles("ada") == {("vision", "owner", "sso"), ("speech", "viewer", "sso")}
    assert not ada.is_staff
    assert "sso group for tenant 'ghost' ignored: there is no such tenant" in caplog.text
    assert CLIENT_SECRET not in caplog.text  # secrets never reach the log, even at DEBUG
    sign_in_row = AuditEvent.objects.get(action="user.sign_in", actor_label="ada")
    assert sign_in_row.after == {"method": "sso"}
    assert sign_in_row.source_ip == "127.0.0.1"
    assert sign_in_row.user_agent.startswith("python-requests")


def test_a_group_removed_at_the_provider_removes_the_membership_at_the_next_sign_in(
    sso_on, live_server, make_tenant, admin
):
    make_tenant("vision"), make_tenant("speech"), make_tenant("nlp")
    sso_on.person("ada", ["gpucloud:vision:owner", "gpucloud:speech:member"])
    sign_in(live_server.url, "ada")
    members.add_member(actor=Actor.of(admin), tenant=make_tenant("robotics"), username="ada", role="viewer")

    sso_on.person("ada", ["gpucloud:vision:viewer", "gpucloud:nlp:admin", ADMIN_GROUP])
    _, page = sign_in(live_server.url, "ada")

    assert page.status_code == 200
    assert roles("ada") == {
        ("vision", "viewer", "sso"),
        ("nlp", "admin", "sso"),
        ("robotics", "viewer", "manual"),  # granted by hand in gpucloud: kept
    }
    assert User.objects.get(username="ada").is_staff
    assert User.objects.filter(username__startswith="ada").count() == 1


def test_people_are_matched_by_subject_not_by_email(sso_on, live_server, make_tenant, make_user):
    make_tenant("vision")
    impostor = make_user("ada")  # a local account that happens to carry the same name
    impostor.email = "ada@corp.example"
    impostor.save()
    sso_on.person("ada", ["gpucloud:vision:member"])

    sign_in(live_server.url, "ada")

    identity = Identity.objects.get(subject="ada")
    assert identity.user != impostor
    assert identity.user.username == "ada2"
    assert roles("ada") == set()


def test_a_person_in_no_allowed_group_is_refused_with_a_clear_page(sso_on, live_server, make_tenant):
    make_tenant("vision")
    sso_on.person("eve", ["staff", "gpucloud:ghost:owner"])

    browser, page = sign_in(live_server.url, "eve")

    assert page.status_code == 403
    assert "You have no access to gpucloud" in page.text
    assert "gpucloud:&lt;tenant&gt;:viewer" in page.text
    assert browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302  # not signed in


def test_a_wrong_password_is_refused_by_the_provider(sso_on, live_server, make_tenant):
    sso_on.person("ada", ["gpucloud:vision:owner"])

    response = follow_to_callback(requests.Session(), live_server.url, "ada", "not the password")

    assert response.status_code == 401
    assert "Wrong login or password" in response.text
    assert not User.objects.filter(username="ada").exists()


def test_a_tampered_state_is_refused(sso_on, live_server, make_tenant):
    make_tenant("vision")
    sso_on.person("ada", ["gpucloud:vision:owner"])
    browser = requests.Session()
    back = follow_to_callback(browser, live_server.url, "ada", "correct horse")
    url = urlsplit(back.headers["Location"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    query["state"] = query["state"][::-1]

    page = browser.get(f"{live_server.url}{url.path}?{urlencode(query)}")

    assert page.status_code == 400
    assert "This sign-in could not be verified" in page.text
    assert not User.objects.filter(username="ada").exists()


def test_an_expired_sign_in_session_is_refused(sso_on, live_server, make_tenant):
    make_tenant("vision")
    sso_on.person("ada", ["gpucloud:vision:owner"])
    browser = requests.Session()
    back = follow_to_callback(browser, live_server.url, "ada", "correct horse")
    for cookie in [c for c in browser.cookies if c.name == "sessionid"]:  # the session ran out meanwhile
        browser.cookies.clear(cookie.domain, cookie.path, cookie.name)

    page = browser.get(back.headers["Location"])

    assert page.status_code == 400
    assert "Your sign-in session expired" in page.text
    assert not User.objects.filter(username="ada").exists()


def test_an_expired_portal_session_asks_to_sign_in_again(sso_on, live_server, make_tenant, settings):
    make_tenant("vision")
    sso_on.person("ada", ["gpucloud:vision:owner"])
    browser, page = sign_in(live_server.url, "ada")
    assert page.status_code == 200

    Session.objects.all().delete()  # as the session expiry would

    again = browser.get(f"{live_server.url}/tenants/vision/", allow_redirects=False)
    assert again.status_code == 302
    assert again.headers["Location"].startswith("/login/")


def test_signing_out_ends_the_provider_session(sso_on, live_server, make_tenant):
    make_tenant("vision")
    sso_on.person("ada", ["gpucloud:vision:owner"])
    browser, _ = sign_in(live_server.url, "ada")

    out = browser.post(
        f"{live_server.url}/logout/",
        headers={"X-CSRFToken": browser.cookies["csrftoken"] or "", "Referer": f"{live_server.url}/"},
        allow_redirects=False,
    )

    assert out.status_code == 302
    target = urlsplit(out.headers["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{sso_on.issuer}/session/end"
    assert parse_qs(target.query)["post_logout_redirect_uri"] == [f"{live_server.url}/login/"]
    assert browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302


def test_a_provider_that_is_down_gives_a_clear_page_and_a_log_line(client, settings, db, caplog):
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # discard port: nothing listens
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gpucloud", "s3cr3t-value"
    sso.forget_discovery()
    with caplog.at_level(logging.ERROR, logger="portal.sso"):
        page = client.get("/oidc/authenticate/")

    assert page.status_code == 503
    assert b"The identity provider cannot be reached" in page.content
    assert "discovery document at http://127.0.0.1:9/.well-known/openid-configuration" in caplog.text
    assert "s3cr3t-value" not in caplog.text


def test_password_sign_in_can_be_switched_off(client, settings, make_user):
    make_user("alice")
    settings.LOCAL_LOGIN = False
    settings.OIDC_ISSUER = "http://127.0.0.1:9"
    settings.AUTHENTICATION_BACKENDS = ["tenants.sso.Backend"]

    page = client.post("/login/", {"username": "alice", "password": "pw-alice"})

    assert page.status_code == 403
    assert b"Password sign-in is switched off here" in page.content
    assert client.get("/", follow=False).status_code == 302


def test_the_discovery_document_is_read_at_start_up(sso_on, caplog):
    with caplog.at_level(logging.INFO, logger="tenants.sso"):
        sso.warm_up().join(10)

    assert f"discovery document of {sso_on.issuer} read" in caplog.text
    assert sso.setting("OIDC_OP_TOKEN_ENDPOINT").startswith(sso_on.issuer)


def test_someone_whose_last_group_is_removed_loses_roles_tokens_and_sessions(
    sso_on, live_server, make_tenant
):
    make_tenant("vision")
    sso_on.person("ada", ["gpucloud:vision:member", ADMIN_GROUP])
    earlier_browser, page = sign_in(live_server.url, "ada")
    assert page.status_code == 200
    ada = User.objects.get(username="ada")
    _, token = tokens.create_token(actor=Actor.of(ada), user=ada, name="laptop", scope="read")
    bearer = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{live_server.url}/api/v1/tenants/vision/", headers=bearer).status_code == 200

    sso_on.person("ada", [])  # the provider's administrator removed ada's last gpucloud group
    _, refused = sign_in(live_server.url, "ada")

    assert refused.status_code == 403
    assert "You have no access to gpucloud" in refused.text
    assert roles("ada") == set()
    assert not User.objects.get(username="ada").is_staff
    answer = requests.get(f"{live_server.url}/api/v1/tenants/", headers=bearer)
    assert answer.status_code == 401
    assert "revoked" in answer.json()["detail"]
    assert earlier_browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302  # signed out
    by_sso = set(AuditEvent.objects.filter(actor_label="system:sso").values_list("action", flat=True))
    assert {"member.remove", "user.platform_admin", "token.revoke", "user.deprovision"} <= by_sso
    failed = AuditEvent.objects.get(action="user.sign_in_failed")
    assert failed.object_id == "ada"
    assert failed.after["method"] == "sso"


def test_a_refused_stranger_is_audited_by_subject(sso_on, live_server, make_tenant):
    sso_on.person("eve", ["staff"])

    _, page = sign_in(live_server.url, "eve")

    assert page.status_code == 403
    assert not User.objects.filter(username="eve").exists()
    failed = AuditEvent.objects.get(action="user.sign_in_failed")
    assert failed.object_id == "eve"
    assert "no group that gives access" in failed.after["reason"]


def test_an_invitation_by_e_mail_becomes_a_membership_at_the_first_single_sign_on(
    sso_on, live_server, make_tenant
):
    vision = make_tenant("vision")
    make_tenant("speech")
    console = Actor.console("test")
    invitations.invite(actor=console, tenant=vision, login="Grace@Corp.Example", role="member")
    sso_on.person("grace", ["gpucloud:speech:viewer"])

    _, page = sign_in(live_server.url, "grace")

    assert page.status_code == 200
    assert roles("grace") == {("vision", "member", "manual"), ("speech", "viewer", "sso")}
    assert not vision.invitations.filter(accepted_at=None).exists()


def test_an_unverified_e_mail_address_claims_no_invitation_and_is_not_taken(sso_on, live_server, make_tenant):
    vision = make_tenant("vision")
    make_tenant("speech")
    invitations.invite(actor=Actor.console("test"), tenant=vision, login="grace@corp.example", role="owner")
    # Mallory types Grace's address into her own profile at the provider, which does not verify it.
    sso_on.person("mallory", ["gpucloud:speech:viewer"], email="grace@corp.example", email_verified=False)

    _, page = sign_in(live_server.url, "mallory")

    assert page.status_code == 200
    assert roles("mallory") == {("speech", "viewer", "sso")}  # not vision's owner
    assert vision.invitations.filter(accepted_at=None).count() == 1
    assert User.objects.get(username="mallory").email == ""
    # …and the address cannot be used to reach her account either: inviting it still makes an invitation.
    console = Actor.console("test")
    pending = invitations.invite(actor=console, tenant=vision, login="grace@corp.example", role="member")
    assert not isinstance(pending, Membership)


def test_an_operator_may_trust_the_provider_s_e_mail_addresses(sso_on, live_server, make_tenant, settings):
    settings.OIDC_TRUST_EMAIL = True  # OIDC_TRUST_EMAIL=true: a provider that sends no email_verified
    vision = make_tenant("vision")
    make_tenant("speech")
    invitations.invite(actor=Actor.console("test"), tenant=vision, login="grace@corp.example", role="member")
    sso_on.person("grace", ["gpucloud:speech:viewer"], email="grace@corp.example", email_verified=False)

    _, page = sign_in(live_server.url, "grace")

    assert page.status_code == 200
    assert roles("grace") == {("vision", "member", "manual"), ("speech", "viewer", "sso")}
    assert User.objects.get(username="grace").email == "grace@corp.example"
