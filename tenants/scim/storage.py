"""scim2-server's storage over gpucloud's rows: SCIM resources come in, service calls go out.

scim2-server (the python-scim project's server core) does the protocol: routing, validation, PATCH
operations, ETags, discovery and errors. This module only turns `ScimUser`/`ScimGroup` rows into
scim2-models resources and back, searches with the database (`tenants.scim.filters`), and writes through
`tenants.scim.services`, which validate, audit and revoke.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    Context,
    EnterpriseUser,
    ETag,
    Filter,
    Group,
    NotFoundException,
    NotImplementedException,
    Pagination,
    Patch,
    PreconditionFailedException,
    Resource,
    ResourceType,
    ResponseParameters,
    ScimPolicy,
    ScimProvider,
    SearchRequest,
    ServiceProviderConfig,
    Sort,
    User,
)
from scim2_server.storage import ScimStorage, SearchPage

from core.audit import Actor
from tenants.models import ScimGroup, ScimUser
from tenants.scim import filters, services

PERSON = User[EnterpriseUser]
MAX_RESULTS = 200
CONFIG = ServiceProviderConfig(
    patch=Patch(supported=True),
    bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
    filter=Filter(supported=True, max_results=MAX_RESULTS),
    change_password=ChangePassword(supported=False),
    sort=Sort(supported=False),
    etag=ETag(supported=True),
    pagination=Pagination(index=True, cursor=False, default_page_size=100, max_page_size=MAX_RESULTS),
    authentication_schemes=[
        AuthenticationScheme(
            type=AuthenticationScheme.Type.oauthbearertoken,
            name="SCIM token",
            description="Authorization: Bearer gpc_…, a SCIM token a platform administrator made "
            "(POST /api/v1/scim/tokens/)",
            primary=True,
        )
    ],
)
# What Entra ID sends besides the letter of RFC 7644 (a value on `remove`, a path filter that must create
# the entry it names); the rest of its habits (string booleans, "Replace", no path) the RFC allows anyway.
POLICY = ScimPolicy(
    remove_value_as_filter=ScimPolicy.RemoveValue.apply,
    unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create,
)
PROVIDER = ScimProvider(
    models=[User, EnterpriseUser, Group],
    resource_types=[ResourceType.from_resource(PERSON), ResourceType.from_resource(Group)],
    config=CONFIG,
    policy=POLICY,
)
# Attributes gpucloud keeps in columns (or computes): never copied into the stored attributes. `active` and
# `members` are stored as sent too, for what the columns cannot say: whether the provider asserted `active`
# at all, and how it displays each member; the account's flag and the membership rows are what counts.
OWN_KEYS = ("schemas", "id", "meta", "userName", "externalId", "groups", "displayName")


def version(row: ScimUser | ScimGroup) -> str:
    return f'W/"{row.version}"'


def _meta(row: ScimUser | ScimGroup, resource_type: str) -> dict[str, Any]:
    return {
        "resourceType": resource_type,
        "created": row.created_at.isoformat(),
        "lastModified": row.updated_at.isoformat(),
        "version": version(row),
    }


def _excluded(parameters: ResponseParameters[Any] | None, attribute: str) -> bool:
    """Whether the response leaves `attribute` out, so it need not be loaded (Entra ID asks for groups
    without their members)."""
    excluded = getattr(parameters, "excluded_attributes", None) or []
    return any(str(path).lower().rsplit(":", 1)[-1] == attribute for path in excluded)


def _emails(stored: list[dict[str, Any]], email: str) -> list[dict[str, Any]]:
    """The stored addresses, with the account's address as the primary one if it is not among them."""
    if not email or any(str(e.get("value", "")).lower() == email.lower() for e in stored):
        return stored
    return [{"value": email, "type": "work", "primary": True}, *({**e, "primary": False} for e in stored)]


def user_resource(row: ScimUser) -> Resource[Any]:
    user = row.user
    doc = dict(row.attributes)
    name = {**(doc.get("name") or {}), "givenName": user.first_name, "familyName": user.last_name}
    name = {key: value for key, value in name.items() if value}
    doc.update(name=name or None, emails=_emails(doc.get("emails") or [], user.email) or None)
    doc.update(
        schemas=[str(User.__schema__)]
        + ([str(EnterpriseUser.__schema__)] if str(EnterpriseUser.__schema__) in doc else []),
        id=row.public_id,
        userName=user.username,
        displayName=row.display_name or None,
        # A deactivated account always says so; an active one says it if the provider asserted it.
        active=user.is_active if ("active" in doc or not user.is_active) else None,
        externalId=row.external_id or None,
        groups=[
            {
                "value": g.public_id,
                "display": g.display_name,
                "$ref": f"Groups/{g.public_id}",
                "type": "direct",
            }
            for g in row.groups.all()
        ]
        or None,
        meta=_meta(row, "User"),
    )
    return PERSON.model_validate({k: v for k, v in doc.items() if v is not None})


def group_resource(row: ScimGroup, *, with_members: bool = True) -> Resource[Any]:
    doc = {
        **row.attributes,
        "schemas": [str(Group.__schema__)],
        "id": row.public_id,
        "displayName": row.display_name,
        "meta": _meta(row, "Group"),
    }
    if row.external_id:
        doc["externalId"] = row.external_id
    shown = {m.get("value"): m.get("display") for m in doc.pop("members", None) or []}
    if with_members:
        members = [
            {
                "value": m.public_id,
                "display": shown.get(m.public_id) or m.user.username,
                "$ref": f"Users/{m.public_id}",
                "type": "User",
            }
            for m in row.members.all()
        ]
        if members:
            doc["members"] = members
    return Group.model_validate(doc)


def _rest(resource: Resource[Any]) -> dict[str, Any]:
    """The attributes gpucloud does not keep in columns, as sent (never the password: it is not kept)."""
    dump = resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    return {key: value for key, value in dump.items() if key not in OWN_KEYS}


def person_of(resource: Any) -> services.Person:
    emails = list(resource.emails or [])
    primary = next((e for e in emails if e.primary), emails[0] if emails else None)
    name = resource.name
    return services.Person(
        username=str(resource.user_name or ""),
        external_id=str(resource.external_id or ""),
        given_name=str(name.given_name or "") if name else "",
        family_name=str(name.family_name or "") if name else "",
        email=str(primary.value or "") if primary else "",
        display_name=str(resource.display_name or ""),
        active=resource.active is not False,  # an account is active unless the provider says otherwise
        attributes=_rest(resource),
    )


def team_of(resource: Any) -> services.Team:
    ids, shown = [], []
    for member in resource.members or []:
        value = str(member.value or str(member.ref or "").rstrip("/").rsplit("/", 1)[-1])
        ids.append(value)
        if member.display:
            shown.append({"value": value, "display": member.display})
    attributes = _rest(resource)
    attributes.pop("members", None)
    if shown:  # how the provider names each member, read back as it sent it
        attributes["members"] = shown
    return services.Team(
        display_name=str(resource.display_name or ""),
        external_id=str(resource.external_id or ""),
        members=tuple(ids),
        attributes=attributes,
    )


class Storage(ScimStorage):
    """Users and Groups in gpucloud's database, written as `actor` (the SCIM token's identity provider)."""

    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    def operation(self) -> Any:
        return transaction.atomic()

    @staticmethod
    def _rows(resource_type: ResourceType, parameters: Any = None) -> QuerySet[Any]:
        if resource_type.name == "User":
            return ScimUser.objects.select_related("user").prefetch_related(
                Prefetch("groups", queryset=ScimGroup.objects.order_by("id"))
            )
        if _excluded(parameters, "members"):
            return ScimGroup.objects.all()
        return ScimGroup.objects.prefetch_related(
            Prefetch("members", queryset=ScimUser.objects.select_related("user").order_by("id"))
        )

    def _resource(self, row: Any, parameters: Any = None) -> Resource[Any]:
        if isinstance(row, ScimUser):
            return user_resource(row)
        return group_resource(row, with_members=not _excluded(parameters, "members"))

    def _row(self, resource_type: ResourceType, resource_id: str, parameters: Any = None) -> Any:
        row = self._rows(resource_type, parameters).filter(public_id=resource_id).first()
        if row is None:
            raise NotFoundException(detail=f"{resource_type.name} {resource_id!r} not found")
        return row

    def get(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        response_parameters: ResponseParameters[Any] | None = None,
    ) -> Resource[Any]:
        return self._resource(self._row(resource_type, resource_id, response_parameters), response_parameters)

    def search(
        self, resource_types: list[ResourceType], search_request: SearchRequest[Any], *, position: Any = None
    ) -> SearchPage:
        if len(resource_types) != 1:
            raise NotImplementedException(
                detail="search /Users or /Groups; a search at the root is not supported"
            )
        resource_type = resource_types[0]
        rows = self._rows(resource_type, search_request).order_by("id")
        if search_request.filter is not None:
            query = filters.user_query if resource_type.name == "User" else filters.group_query
            rows = rows.filter(query(search_request.filter.ast)).distinct()
        start = search_request.start_index_0 or 0
        count = search_request.count if search_request.count is not None else MAX_RESULTS
        page = [self._resource(row, search_request) for row in rows[start : start + count]]
        return SearchPage(total=rows.count(), resources=page)

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        row: ScimUser | ScimGroup
        if resource_type.name == "User":
            row = services.create_user(actor=self.actor, person=person_of(resource))
        else:
            row = services.create_group(actor=self.actor, team=team_of(resource))
        return self.get(resource_type, row.public_id)

    def _locked(self, resource_type: ResourceType, resource_id: str, expected_version: str | None) -> Any:
        model = ScimUser if resource_type.name == "User" else ScimGroup
        row = model.objects.select_for_update().filter(public_id=resource_id).first()
        if row is None:
            raise NotFoundException(detail=f"{resource_type.name} {resource_id!r} not found")
        if expected_version is not None and version(row) != expected_version:
            raise PreconditionFailedException(detail=f"{resource_type.name} {resource_id} changed meanwhile")
        return row

    def update(
        self, resource_type: ResourceType, resource: Resource[Any], *, expected_version: str | None = None
    ) -> Resource[Any]:
        row = self._locked(resource_type, str(resource.id), expected_version)
        if resource_type.name == "User":
            services.update_user(actor=self.actor, row=row, person=person_of(resource))
        else:
            services.update_group(actor=self.actor, row=row, team=team_of(resource))
        return self.get(resource_type, row.public_id)

    def delete(
        self, resource_type: ResourceType, resource_id: str, *, expected_version: str | None = None
    ) -> None:
        row = self._locked(resource_type, resource_id, expected_version)
        if resource_type.name == "User":
            services.delete_user(actor=self.actor, row=row)
        else:
            services.delete_group(actor=self.actor, row=row)
