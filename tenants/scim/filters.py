"""SCIM filters (RFC 7644 §3.4.2.2) as Django `Q` objects, so the database filters and counts.

scim2-models parses and validates the filter against the resource's schema; this walks the tree it gives.
Only the attributes gpucloud keeps in columns can be filtered on (`USER_FIELDS`, `GROUP_FIELDS`); any other
is refused with `invalidFilter` naming the ones that can, never answered with a wrong list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils.dateparse import parse_datetime
from scim2_models import InvalidFilterException
from scim2_models.path import (
    AttrPath,
    CompareOperator,
    Comparison,
    FilterNode,
    FilterVisitor,
    LogicalExpr,
    LogicalOperator,
    Not,
    Present,
    ValuePath,
)

CORE_USER = "urn:ietf:params:scim:schemas:core:2.0:user"
CORE_GROUP = "urn:ietf:params:scim:schemas:core:2.0:group"


@dataclass(frozen=True)
class Field:
    """Where an attribute is kept, and how SCIM compares it."""

    lookup: str
    kind: str = "text"  # text, bool or time
    case_exact: bool = False


# (attribute, sub-attribute) in lowercase → the column; `emails` is the account's one address.
USER_FIELDS: dict[tuple[str, str | None], Field] = {
    ("id", None): Field("public_id", case_exact=True),
    ("externalid", None): Field("external_id", case_exact=True),
    ("username", None): Field("user__username"),
    ("displayname", None): Field("display_name"),
    ("active", None): Field("user__is_active", kind="bool"),
    ("emails", None): Field("user__email"),
    ("emails", "value"): Field("user__email"),
    ("name", "givenname"): Field("user__first_name"),
    ("name", "familyname"): Field("user__last_name"),
    ("meta", "created"): Field("created_at", kind="time"),
    ("meta", "lastmodified"): Field("updated_at", kind="time"),
}
GROUP_FIELDS: dict[tuple[str, str | None], Field] = {
    ("id", None): Field("public_id", case_exact=True),
    ("externalid", None): Field("external_id", case_exact=True),
    ("displayname", None): Field("display_name"),
    ("members", None): Field("members__public_id", case_exact=True),
    ("members", "value"): Field("members__public_id", case_exact=True),
    ("meta", "created"): Field("created_at", kind="time"),
    ("meta", "lastmodified"): Field("updated_at", kind="time"),
}

TEXT_LOOKUPS = {
    CompareOperator.eq: "exact",
    CompareOperator.co: "contains",
    CompareOperator.sw: "startswith",
    CompareOperator.ew: "endswith",
    CompareOperator.gt: "gt",
    CompareOperator.ge: "gte",
    CompareOperator.lt: "lt",
    CompareOperator.le: "lte",
}
CASELESS = {"exact": "iexact", "contains": "icontains", "startswith": "istartswith", "endswith": "iendswith"}


class QueryBuilder(FilterVisitor[Q]):
    """One filter tree → one `Q` over `ScimUser` or `ScimGroup` rows."""

    def __init__(self, fields: dict[tuple[str, str | None], Field], core_schema: str) -> None:
        self.fields = fields
        self.core_schema = core_schema
        self.within: str | None = None  # the multi-valued attribute of a value path, e.g. `emails`

    def visit_logical_expr(self, node: LogicalExpr) -> Q:
        terms = [self.visit(term) for term in node.terms]
        combined = terms[0]
        for term in terms[1:]:
            combined = combined & term if node.op == LogicalOperator.and_ else combined | term
        return combined

    def visit_not(self, node: Not) -> Q:
        return ~self.visit(node.expr)

    def visit_value_path(self, node: ValuePath) -> Q:
        # emails[value co "@example.com"]: the inner filter names sub-attributes of `emails`.
        self.within = node.attr_path.attr
        try:
            return self.visit(node.val_filter)
        finally:
            self.within = None

    def visit_present(self, node: Present) -> Q:
        field = self.field(node.attr_path)
        if field.kind != "text":
            return Q(**{f"{field.lookup}__isnull": False})
        return Q(**{f"{field.lookup}__isnull": False}) & ~Q(**{field.lookup: ""})

    def visit_comparison(self, node: Comparison) -> Q:
        field = self.field(node.attr_path)
        value = self.value(field, node)
        negated = node.op == CompareOperator.ne
        lookup = TEXT_LOOKUPS[CompareOperator.eq if negated else node.op]
        if field.kind == "bool" and lookup != "exact":
            raise InvalidFilterException(detail=f"{node.attr_path} is a boolean: compare it with eq or ne")
        if field.kind == "text" and not field.case_exact:
            lookup = CASELESS.get(lookup, lookup)
        query = Q(**{f"{field.lookup}__{lookup}": value})
        return ~query if negated else query

    def field(self, path: AttrPath) -> Field:
        if path.uri is not None and path.uri.lower() != self.core_schema:
            raise InvalidFilterException(detail=f"filtering on {path} is not supported")
        attr, sub = path.attr.lower(), (path.sub_attr.lower() if path.sub_attr else None)
        if self.within is not None:
            attr, sub = self.within.lower(), attr
        field = self.fields.get((attr, sub))
        if field is None:
            named = f"{self.within}[{path}]" if self.within else str(path)
            allowed = ", ".join(sorted(f"{a}.{s}" if s else a for a, s in self.fields))
            raise InvalidFilterException(
                detail=f"filtering on {named} is not supported; these attributes can be filtered: {allowed}"
            )
        return field

    @staticmethod
    def value(field: Field, node: Comparison) -> Any:
        value = node.value
        if field.kind == "bool":
            # Entra ID sends booleans as strings ("False"); anything else is not a boolean.
            text = str(value).lower()
            if isinstance(value, bool) or text in ("true", "false"):
                return value if isinstance(value, bool) else text == "true"
            raise InvalidFilterException(detail=f"{node.attr_path} is a boolean, not {value!r}")
        if field.kind == "time":
            moment = parse_datetime(str(value))
            if moment is None:
                raise InvalidFilterException(detail=f"{node.attr_path} needs a date-time, not {value!r}")
            return moment
        if not isinstance(value, str):
            raise InvalidFilterException(detail=f"{node.attr_path} is a string, not {value!r}")
        return value


def user_query(node: FilterNode) -> Q:
    return QueryBuilder(USER_FIELDS, CORE_USER).visit(node)


def group_query(node: FilterNode) -> Q:
    return QueryBuilder(GROUP_FIELDS, CORE_GROUP).visit(node)
