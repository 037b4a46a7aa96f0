"""Single sign-on through any OpenID provider (docs/sso.md).

One setting, `OIDC_ISSUER`, is enough: the endpoints come from the issuer's discovery document, read once
per process and read again while it fails. Users are matched by (issuer, `sub`), never by e-mail; an
account the provider made over SCIM is linked at its first sign-in by `OIDC_SCIM_LINK_CLAIM`. The groups the
provider puts someone in (the groups claim of their sign-in, and the SCIM groups it pushes) decide their
platform-administrator flag and their `sso` memberships (`OIDC_TENANT_GROUP_PATTERN`, default
`gpucloud:{tenant}:{role}`); memberships granted by hand are kept. An e-mail address is taken only when the
provider verified it (`email_verified`) or the operator trusts its addresses (`OIDC_TRUST_EMAIL`): pending
invitations are claimed by it.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify, import_from_settings

from core import audit
from core.audit import Actor
from tenants import invitations, tokens, users
from tenants.models import Identity, Membership, ScimGroup, ScimUser, Tenant
from tenants.services import members, platform_admins

log = logging.getLogger(__name__)
User = get_user_model()

# mozilla-django-oidc setting → key of the discovery document.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_documents: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The OpenID provider cannot be used now: not configured, unreachable, or answering nonsense."""


class SignInRefused(SuspiciousOperation):
    """The provider vouched for the person, but gpucloud will not let them in; the message says why."""


def discovery(issuer: str | None = None) -> dict[str, Any]:
    """The issuer's discovery document, fetched once per process (and again after a failure)."""
    issuer = (issuer if issuer is not None else settings.OIDC_ISSUER).rstrip("/")
    if not issuer:
        raise ProviderUnavailable("single sign-on is not configured (OIDC_ISSUER is empty)")
    with _lock:
        if issuer not in _documents:
            _documents[issuer] = _fetch(issuer)
        return _documents[issuer]


def _fetch(issuer: str) -> dict[str, Any]:
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"the discovery document at {url} could not be read: {exc}") from exc
    missing = [key for key in DISCOVERED.values() if not document.get(key)]
    if missing or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(
            f"the discovery document at {url} is not usable: issuer {document.get('issuer')!r}, "
            f"missing {', '.join(missing) or 'nothing'}"
        )
    return dict(document)


def warm_up() -> threading.Thread | None:
    """Fetch the discovery document in a background thread, logging the outcome (web process start-up)."""
    if not settings.OIDC_ISSUER:
        return None

    def fetch() -> None:
        try:
            document = discovery()
        except ProviderUnavailable as exc:
            log.error("single sign-on is configured but the provider cannot be used yet: %s", exc)
        else:
            log.info("single sign-on: discovery document of %s read", document["issuer"])

    thread = threading.Thread(target=fetch, name="oidc-discovery", daemon=True)
    thread.start()
    return thread


def forget_discovery() -> None:
    with _lock:
        _documents.clear()


def setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, with the provider's endpoints taken from discovery."""
    if attr in DISCOVERED:
        return discovery()[DISCOVERED[attr]]
    return import_from_settings(attr, *default)


@dataclass(frozen=True)
class Grants:
    """What a groups claim gives: platform administration, and a role per existing tenant."""

    admin: bool
    tenants: dict[Tenant, str]

    @property
    def any(self) -> bool:
        return self.admin or bool(self.tenants)


def group_pattern(pattern: str) -> re.Pattern[str]:
    """`gpucloud:{tenant}:{role}` as a regular expression with named groups."""
    escaped = re.escape(pattern)
    escaped = escaped.replace(re.escape("{tenant}"), r"(?P<tenant>[a-z][a-z0-9-]*)")
    escaped = escaped.replace(re.escape("{role}"), r"(?P<role>[a-z]+)")
    return re.compile(f"^{escaped}$")


def grants_from(groups: list[str]) -> Grants:
    """Read the groups claim; a group naming a tenant or role that does not exist is logged and ignored."""
    names = [str(g).lstrip("/") for g in groups]  # Keycloak sends full paths: "/gpucloud:vision:owner"
    admin = bool(set(names) & set(settings.OIDC_ADMIN_GROUPS))
    pattern = group_pattern(settings.OIDC_TENANT_GROUP_PATTERN)
    wanted: dict[str, str] = {}
    rank = {role: i for i, role in enumerate(Membership.Role.values)}  # owner first: the strongest wins
    for name in names:
        match = pattern.match(name)
        if not match:
            continue
        slug, role = match["tenant"], match["role"]
        if role not in rank:
            log.warning("sso group %r names the role %r, which does not exist; ignored", name, role)
            continue
        if slug not in wanted or rank[role] < rank[wanted[slug]]:
            wanted[slug] = role
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=wanted).exclude(state=Tenant.State.DELETED)}
    for slug in sorted(set(wanted) - set(tenants)):
        log.warning("sso group for tenant %r ignored: there is no such tenant", slug)
    return Grants(
        admin=admin, tenants={tenants[slug]: role for slug, role in wanted.items() if slug in tenants}
    )


def provider_groups(user: Any, claimed: list[str] | None = None) -> list[str]:
    """The groups the identity provider puts `user` in: those of their sign-in's groups claim (`claimed`,
    else the claim of their last sign-in) and the SCIM groups it pushed them into.

    Both come from the same provider, so either is enough: a provider that pushes groups over SCIM need not
    put them in the claim too. A removal over SCIM strikes the group from the last claim as well
    (`forget_group`), so it takes effect at once rather than at the next sign-in.
    """
    if claimed is None:
        identity = Identity.objects.filter(user=user, issuer=settings.OIDC_ISSUER).first()
        claimed = list(identity.groups) if identity else []
    pushed = ScimGroup.objects.filter(members__user=user).values_list("display_name", flat=True)
    return sorted({str(g) for g in claimed} | set(pushed))


def forget_group(user: Any, group: str) -> None:
    """The provider says (over SCIM) that `user` is no longer in `group`: strike it from their last claim."""
    for identity in Identity.objects.select_for_update().filter(user=user, issuer=settings.OIDC_ISSUER):
        kept = [g for g in identity.groups if str(g).lstrip("/") != group.lstrip("/")]
        if kept != identity.groups:
            identity.groups = kept
            identity.save(update_fields=["groups"])


def sync_grants(*, actor: Actor, user: Any, claimed: list[str] | None = None) -> Grants:
    """Make `user`'s platform administration and `sso` memberships what their provider groups give now."""
    grants = grants_from(provider_groups(user, claimed))
    platform_admins.set_platform_admin(actor=actor, user=user, admin=grants.admin)
    members.sync_sso_memberships(actor=actor, user=user, grants=grants.tenants)
    return grants


def verified_email(claims: dict[str, Any]) -> str:
    """The claims' e-mail address if gpucloud may rely on it, else "".

    Invitations are claimed by e-mail address (`tenants.invitations`), so an address the person merely typed
    in at the provider must not count: the provider must say it verified it (`email_verified`, a boolean or,
    as some providers send it, the string "true"), or the operator trusts every address the provider sends
    (`OIDC_TRUST_EMAIL`, for providers that only hold addresses their administrators set, such as Entra ID).
    """
    email = str(claims.get("email") or "").strip()
    verified = claims.get("email_verified")
    if verified is True or str(verified).lower() == "true" or settings.OIDC_TRUST_EMAIL:
        return email
    if email:
        log.info(
            "sso: the e-mail address of subject %s is not verified by the provider; not taken", claims["sub"]
        )
    return ""


class Backend(OIDCAuthenticationBackend):  # type: ignore[misc]  # mozilla-django-oidc ships no types
    """mozilla-django-oidc's backend, matching users by `sub` and syncing roles from groups."""

    get_settings = staticmethod(setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The endpoints are read when a sign-in needs them, so a provider that is down never breaks
        # password sign-in (Django builds every backend for every authenticate() call).
        self.UserModel = User

    def __getattr__(self, name: str) -> Any:
        if name.startswith("OIDC_"):
            return setting(name, None)
        raise AttributeError(name)

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not claims.get("sub"):
            self._refuse("the provider sent no subject (sub) for this person")
        identity = (
            Identity.objects.select_related("user")
            .filter(issuer=settings.OIDC_ISSUER, subject=claims["sub"])
            .first()
        )
        account = identity.user if identity is not None else self._provisioned(claims)
        self._note_who(account.get_username() if account else str(claims["sub"]))
        if account is not None and not account.is_active:
            self._refuse(
                "your gpucloud account is deactivated; ask an administrator of your identity provider or of "
                "gpucloud to reactivate it"
            )
        grants = grants_from(
            provider_groups(account, self._groups(claims)) if account else self._groups(claims)
        )
        hand_granted = account is not None and (
            account.memberships.filter(source=Membership.Source.MANUAL).exists()
        )
        if not grants.any and not hand_granted:
            if identity is not None:
                # Sync, then refuse: the provider took the last group away, so what sign-in gave goes too.
                deprovision(identity.user)
            self._refuse(
                "your account at the identity provider is in no group that gives access to gpucloud; "
                "ask an administrator to add you to a group such as "
                + settings.OIDC_TENANT_GROUP_PATTERN.format(tenant="<tenant>", role="viewer")
            )
        return True

    def _provisioned(self, claims: dict[str, Any]) -> Any:
        """The account the provider made over SCIM for this person, not yet linked to a sign-in.

        Its SCIM `userName` is compared with the claim `OIDC_SCIM_LINK_CLAIM` (default `preferred_username`:
        Okta, Entra ID and Keycloak send the same value in both). The link is made once, at the first
        sign-in; from then on the person is known by `sub` alone.
        """
        value = str(claims.get(settings.OIDC_SCIM_LINK_CLAIM) or "").strip()
        if not value:
            return None
        row = (
            ScimUser.objects.select_related("user")
            .filter(user__username__iexact=value)
            .exclude(user__identities__issuer=settings.OIDC_ISSUER)
            .first()
        )
        return row.user if row else None

    def get_user(self, user_id: Any) -> Any:
        # mozilla-django-oidc loads a session's user without looking at the flag; a deactivated one is no one.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def _note_who(self, name: str) -> None:
        request = getattr(self, "request", None)
        if request is not None:
            request.sso_username = name  # for the audit row of a refused sign-in

    def _refuse(self, reason: str) -> None:
        # mozilla-django-oidc turns the exception into "no user"; the request carries the reason to the page.
        request = getattr(self, "request", None)
        if request is not None:
            request.sso_refusal = reason
        raise SignInRefused(reason)

    def _groups(self, claims: dict[str, Any]) -> list[str]:
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        return [groups] if isinstance(groups, str) else list(groups)

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return User.objects.filter(
            identities__issuer=settings.OIDC_ISSUER, identities__subject=claims["sub"]
        ).distinct()

    @transaction.atomic
    def create_user(self, claims: dict[str, Any]) -> Any:
        user = self._provisioned(claims)
        if user is not None:
            log.info("sso linked subject %s to %s, provisioned over SCIM", claims["sub"], user.username)
        else:
            user = User.objects.create_user(self._free_username(claims), email=verified_email(claims))
            user.set_unusable_password()
            user.save(update_fields=["password"])
            ScimUser.objects.create(user=user)  # so the provider can find and adopt it over SCIM
            log.info("sso created user %s for subject %s", user.username, claims["sub"])
        Identity.objects.create(user=user, issuer=settings.OIDC_ISSUER, subject=claims["sub"])
        return self.update_user(user, claims)

    def _free_username(self, claims: dict[str, Any]) -> str:
        wanted = claims.get("preferred_username") or (claims.get("email") or "").split("@")[0] or "user"
        base = re.sub(r"[^\w.@+-]", "", str(wanted))[:140] or "user"
        name, n = base, 1
        while User.objects.filter(username=name).exists():
            n += 1
            name = f"{base}{n}"
        return name

    @transaction.atomic
    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        groups = self._groups(claims)
        user.email = verified_email(claims) or user.email  # an unverified address never replaces one
        user.first_name = str(claims.get("given_name", user.first_name))[:150]
        user.last_name = str(claims.get("family_name", user.last_name))[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        Identity.objects.filter(user=user, issuer=settings.OIDC_ISSUER, subject=claims["sub"]).update(
            groups=groups, last_login_at=timezone.now()
        )
        sync_grants(actor=Actor.system("sso"), user=user, claimed=groups)
        invitations.accept(user)  # roles someone gave this person before their first sign-in
        return user


@transaction.atomic
def deprovision(user: Any) -> None:
    """The provider no longer gives `user` any access: take away what sign-in gave, and what they still hold.

    Their `sso` memberships and platform administration go, their personal tokens are revoked, and their
    portal sessions end. Memberships granted by hand would have let them in, so there are none left to keep.
    The account stays active: a group given back lets them in again (SCIM's `active: false` deactivates).
    """
    actor = Actor.system("sso")
    members.sync_sso_memberships(actor=actor, user=user, grants={})
    platform_admins.set_platform_admin(actor=actor, user=user, admin=False)
    revoked = tokens.revoke_personal_tokens(actor=actor, user=user)
    ended = users.end_sessions(user)
    audit.record(
        actor,
        "user.deprovision",
        object_type="user",
        object_id=user.get_username(),
        after={"tokens_revoked": revoked, "sessions_ended": ended},
    )
    log.info("sso deprovisioned %s: no group gives access any more", user.get_username())


def provider_logout_url(request: HttpRequest) -> str:
    """Where signing out sends the browser: the provider's end_session_endpoint when it has one, so the
    provider session ends too; else gpucloud's sign-in page."""
    back: str = absolutify(request, reverse(settings.LOGOUT_REDIRECT_URL))  # mozilla-django-oidc: untyped
    try:
        end_session = discovery().get("end_session_endpoint")
    except ProviderUnavailable as exc:
        log.warning("sign-out could not end the provider session: %s", exc)
        return back
    if not end_session:
        return back
    query = urlencode({"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": back})
    return f"{end_session}?{query}"
