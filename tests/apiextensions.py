"""What the Kubernetes API server refuses in a CustomResourceDefinition, ported from
k8s.io/apiextensions-apiserver (Go), for tests: `refusals(crd)` lists what a create would be refused for.

No package on PyPI or npm applies these rules: `kubernetes-validate` checks a CRD object against the
CustomResourceDefinition's own OpenAPI schema (field names and types, which `tests` also run), not the rules
the API server adds — a structural schema, what `metadata` may say, the `x-kubernetes-*` extensions. So the
rules are ported here, function by function; each Python function names the Go function it mirrors, in

    pkg/apis/apiextensions/v1/defaults.go          SetDefaults_CustomResourceDefinitionSpec
    pkg/apis/apiextensions/v1/conversion.go        Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_…
    pkg/apis/apiextensions/validation/validation.go ValidateCustomResourceDefinition and what it calls
    pkg/apiserver/schema/convert.go                NewStructural, validateUnsupportedFields
    pkg/apiserver/schema/validation.go             ValidateStructural and its invariants
    pkg/apiserver/schema/complete.go               validateStructuralCompleteness

Errors read as `field.Error.Error()` does (`spec.validation.openAPIV3Schema.properties[metadata]: Forbidden:
…`), so a refusal here can be compared with what `kubectl apply` prints. Regular expressions are compiled with
RE2 (PyPI google-re2), whose syntax Go's regexp implements, not with Python's `re`.

Not ported, and therefore refused rather than passed unseen: compiling and costing CEL rules
(`x-kubernetes-validations[*].rule`, cel.Compile), checking `default` values against their schema
(structuraldefaulting.ValidateDefaults), selectable fields (cel.ValidFieldPath) and conversion webhooks
(webhook.ValidateWebhookURL/Service). A CRD that uses one of them needs the port extended first. Updates
(ValidateCustomResourceDefinitionUpdate: immutable names, stored versions, ratcheting) are not checked: these
rules are those of a create, which is what `kubectl apply` does to a cluster without the CRD.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

import re2

# ------------------------------------------------------------------------------------------ field errors


@dataclass(frozen=True)
class Path:
    """k8s.io/apimachinery/pkg/util/validation/field.Path: `a.b[0][key]`."""

    text: str

    def child(self, *names: str) -> Path:
        return Path(".".join([self.text, *names]) if self.text else ".".join(names))

    def index(self, i: int) -> Path:
        return Path(f"{self.text}[{i}]")

    def key(self, k: str) -> Path:
        return Path(f"{self.text}[{k}]")

    def __str__(self) -> str:
        return self.text


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def required(path: Path, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def forbidden(path: Path, detail: str = "") -> str:
    return f"{path}: Forbidden" + (f": {detail}" if detail else "")


def invalid(path: Path, value: Any, detail: str = "") -> str:
    return f"{path}: Invalid value: {_value(value)}" + (f": {detail}" if detail else "")


def not_supported(path: Path, value: Any, supported: list[str]) -> str:
    return f"{path}: Unsupported value: {_value(value)}: supported values: " + ", ".join(
        json.dumps(s) for s in supported
    )


def unported(path: Path, what: str) -> str:
    return f"{path}: Not checked: {what} is not ported (tests/apiextensions.py); extend the port first"


# ------------------------------------------------------------------------------------------ names


DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def is_dns1123_subdomain(value: str) -> list[str]:
    """apimachinery/pkg/util/validation IsDNS1123Subdomain."""
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return errors


def is_dns1035_label(value: str) -> list[str]:
    """apimachinery/pkg/util/validation IsDNS1035Label."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not DNS1035_LABEL.fullmatch(value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character"
        )
    return errors


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def go_regexp_error(pattern: str) -> str | None:
    """Why Go's regexp.Compile refuses `pattern` (RE2 syntax: no look-around, no back-references), or None."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        return exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    return None


# ------------------------------------------------------------------------------------------ decoding

# JSONSchemaProps' JSON fields (pkg/apis/apiextensions/v1/types_jsonschema.go), by the Go type they decode to.
_STRING = {
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "format",
    "title",
    "pattern",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
}
_BOOL = {
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
}
_INT = {"maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"}
_NUMBER = {"maximum", "minimum", "multipleOf"}
_STRINGS = {"required", "x-kubernetes-list-map-keys"}
_SCHEMAS = {"allOf", "oneOf", "anyOf"}
_SCHEMA_MAPS = {"properties", "patternProperties", "definitions"}
_ANY = {"default", "example", "enum", "externalDocs", "dependencies", "x-kubernetes-validations"}
_SCHEMA_OR_BOOL = {"additionalProperties", "additionalItems"}
JSON_SCHEMA_PROPS = _STRING | _BOOL | _INT | _NUMBER | _STRINGS | _SCHEMAS | _SCHEMA_MAPS | _ANY
JSON_SCHEMA_PROPS |= _SCHEMA_OR_BOOL | {"items", "not"}
VALIDATION_RULE = {"rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"}


def _unknown(path: Path, name: str) -> str:
    return f'unknown field "{path.child(name)}"'


def _decode_schema(node: Any, path: Path) -> list[str]:
    """JSON → JSONSchemaProps as the API server decodes a request with strict field validation (kubectl's
    default since 1.27): an unknown field or a value of the wrong type refuses the whole object."""
    if not isinstance(node, dict):
        return [f"{path}: cannot decode {_value(node)} as a JSONSchemaProps object"]
    errors = []
    for name, value in node.items():
        where = path.child(name)
        if name not in JSON_SCHEMA_PROPS:
            errors.append(_unknown(path, name))
        elif name in _STRING and not isinstance(value, str):
            errors.append(f"{where}: cannot decode {_value(value)} as a string")
        elif name in _BOOL and not isinstance(value, bool):
            errors.append(f"{where}: cannot decode {_value(value)} as a boolean")
        elif name in _INT and (isinstance(value, bool) or not isinstance(value, int)):
            errors.append(f"{where}: cannot decode {_value(value)} as an integer")
        elif name in _NUMBER and (isinstance(value, bool) or not isinstance(value, int | float)):
            errors.append(f"{where}: cannot decode {_value(value)} as a number")
        elif name in _STRINGS and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            errors.append(f"{where}: cannot decode {_value(value)} as a list of strings")
        elif name in _SCHEMAS:
            if not isinstance(value, list):
                errors.append(f"{where}: cannot decode {_value(value)} as a list of schemas")
            else:
                for i, item in enumerate(value):
                    errors += _decode_schema(item, where.index(i))
        elif name in _SCHEMA_MAPS:
            if not isinstance(value, dict):
                errors.append(f"{where}: cannot decode {_value(value)} as a map of schemas")
            else:
                for key, item in value.items():
                    errors += _decode_schema(item, where.key(key))
        elif name == "not" or (name in _SCHEMA_OR_BOOL and not isinstance(value, bool)):
            errors += _decode_schema(value, where)
        elif name == "items":
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                errors += _decode_schema(item, where.index(i) if isinstance(value, list) else where)
        elif name == "x-kubernetes-validations":
            for i, rule in enumerate(value if isinstance(value, list) else [value]):
                if not isinstance(rule, dict):
                    errors.append(f"{where.index(i)}: cannot decode {_value(rule)} as a ValidationRule")
                    continue
                errors += [_unknown(where.index(i), k) for k in rule if k not in VALIDATION_RULE]
        elif name == "enum" and not isinstance(value, list):
            errors.append(f"{where}: cannot decode {_value(value)} as a list")
    return errors


CRD_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}
SPEC_FIELDS = {"group", "names", "scope", "versions", "conversion", "preserveUnknownFields"}
NAMES_FIELDS = {"plural", "singular", "shortNames", "kind", "listKind", "categories"}
VERSION_FIELDS = {
    "name",
    "served",
    "storage",
    "deprecated",
    "deprecationWarning",
    "schema",
    "subresources",
    "additionalPrinterColumns",
    "selectableFields",
}
COLUMN_FIELDS = {"name", "type", "format", "description", "priority", "jsonPath"}
SUBRESOURCE_FIELDS = {"status", "scale"}
SCALE_FIELDS = {"specReplicasPath", "statusReplicasPath", "labelSelectorPath"}


def _decode_crd(crd: dict[str, Any]) -> list[str]:
    """The CustomResourceDefinition's own fields (pkg/apis/apiextensions/v1/types.go), strictly decoded."""
    errors = [_unknown(Path(""), k) for k in crd if k not in CRD_FIELDS]
    spec = crd.get("spec") or {}
    errors += [_unknown(Path("spec"), k) for k in spec if k not in SPEC_FIELDS]
    errors += [_unknown(Path("spec.names"), k) for k in spec.get("names") or {} if k not in NAMES_FIELDS]
    for i, version in enumerate(spec.get("versions") or []):
        where = Path("spec.versions").index(i)
        errors += [_unknown(where, k) for k in version if k not in VERSION_FIELDS]
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            column_path = where.child("additionalPrinterColumns").index(j)
            errors += [_unknown(column_path, k) for k in column if k not in COLUMN_FIELDS]
        subresources = version.get("subresources") or {}
        errors += [
            _unknown(where.child("subresources"), k) for k in subresources if k not in SUBRESOURCE_FIELDS
        ]
        scale = subresources.get("scale") or {}
        errors += [_unknown(where.child("subresources", "scale"), k) for k in scale if k not in SCALE_FIELDS]
        schema = version.get("schema") or {}
        errors += [_unknown(where.child("schema"), k) for k in schema if k != "openAPIV3Schema"]
        if "openAPIV3Schema" in schema:
            errors += _decode_schema(schema["openAPIV3Schema"], where.child("schema", "openAPIV3Schema"))
    return errors


# ------------------------------------------------------------------------------------------ the CRD


def set_defaults(crd: dict[str, Any]) -> dict[str, Any]:
    """defaults.go SetDefaults_CustomResourceDefinitionSpec: singular, listKind, conversion strategy None."""
    crd = copy.deepcopy(crd)
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if not names.get("singular"):
        names["singular"] = (names.get("kind") or "").lower()
    if not names.get("listKind") and names.get("kind"):
        names["listKind"] = names["kind"] + "List"
    spec.setdefault("conversion", {"strategy": "None"})
    return crd


def refusals(crd: dict[str, Any]) -> list[str]:
    """Every reason the API server would refuse to create `crd` (apiextensions.k8s.io/v1); [] if none."""
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1" or crd.get("kind") != "CustomResourceDefinition":
        return [
            "not an apiextensions.k8s.io/v1 CustomResourceDefinition: "
            f"{crd.get('apiVersion')}/{crd.get('kind')}"
        ]
    decoding = _decode_crd(crd)
    if decoding:
        return decoding  # the request is refused before validation runs
    return validate_custom_resource_definition(set_defaults(crd))


def validate_custom_resource_definition(crd: dict[str, Any]) -> list[str]:
    """validation.go ValidateCustomResourceDefinition (a create), with its name rule."""
    spec = crd["spec"]
    name = (crd.get("metadata") or {}).get("name", "")
    errors = []
    if not name:
        errors.append(required(Path("metadata.name"), "name or generateName is required"))
    else:
        problems = is_dns1123_subdomain(name)
        if name != f"{spec['names'].get('plural', '')}.{spec.get('group', '')}":
            problems.append('must be spec.names.plural+"."+spec.group')
        errors += [invalid(Path("metadata.name"), name, p) for p in problems]
    errors += validate_spec(spec, Path("spec"))
    errors += validate_api_approval(crd)
    if spec.get("preserveUnknownFields") is True:  # validatePreserveUnknownFields
        errors.append(
            invalid(
                Path("spec.preserveUnknownFields"),
                True,
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                "spec.versions[*].schema instead",
            )
        )
    return errors


def validate_api_approval(crd: dict[str, Any]) -> list[str]:
    """validation.go validateAPIApproval: groups under k8s.io and kubernetes.io need an approval."""
    group = crd["spec"].get("group", "")
    protected = any(group == g or group.endswith("." + g) for g in ("k8s.io", "kubernetes.io"))
    annotation = "api-approved.kubernetes.io"
    if protected and not ((crd.get("metadata") or {}).get("annotations") or {}).get(annotation):
        return [required(Path("metadata.annotations").key(annotation), "protected groups must have approval")]
    return []


def to_internal(spec: dict[str, Any]) -> dict[str, Any]:
    """conversion.go Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_CustomResourceDefinitionSpec:
    a per-version field that every version has identical moves to the top level (spec.validation,
    spec.subresources, spec.additionalPrinterColumns), where it is then validated and reported."""
    internal = copy.deepcopy(spec)
    versions = internal.get("versions") or []
    for field_name, top in (
        ("schema", "validation"),
        ("subresources", "subresources"),
        ("additionalPrinterColumns", "additionalPrinterColumns"),
    ):
        values = [v.get(field_name) for v in versions]
        if versions and all(value == values[0] for value in values):
            if values[0] is not None:
                internal[top] = values[0]
            for version in versions:
                version.pop(field_name, None)
    return internal


def validate_spec(v1_spec: dict[str, Any], path: Path) -> list[str]:
    """validation.go validateCustomResourceDefinitionSpec, with the options of a v1 create: an OpenAPI schema
    and a structural one required, defaults allowed, atomic set items and map-list key rules enforced."""
    spec = to_internal(v1_spec)
    errors = []
    group = spec.get("group", "")
    if not group:
        errors.append(required(path.child("group")))
    elif problems := is_dns1123_subdomain(group):
        errors.append(invalid(path.child("group"), group, ",".join(problems)))
    elif len(group.split(".")) < 2:
        errors.append(invalid(path.child("group"), group, "should be a domain with at least one dot"))
    errors += _enum(path.child("scope"), spec.get("scope", ""), ["Cluster", "Namespaced"], needed=True)

    versions = spec.get("versions") or []
    if "validation" not in spec:
        for i, version in enumerate(versions):
            if not (version.get("schema") or {}).get("openAPIV3Schema"):
                errors.append(required(path.child("versions").index(i).child("schema", "openAPIV3Schema")))
    names_seen: set[str] = set()
    for i, version in enumerate(versions):
        where = path.child("versions").index(i)
        name = version.get("name", "")
        if problems := is_dns1035_label(name):
            errors.append(invalid(where.child("name"), name, ",".join(problems)))
        names_seen.add(name)
        subresources = version.get("subresources", spec.get("subresources"))
        errors += validate_version(
            version, where, status_enabled=bool((subresources or {}).get("status") is not None)
        )
    if len(names_seen) != len(versions):
        errors.append(invalid(path.child("versions"), "…", "must contain unique version names"))
    if sum(bool(v.get("storage")) for v in versions) != 1:
        errors.append(
            invalid(path.child("versions"), "…", "must have exactly one version marked as storage version")
        )

    names = spec.get("names") or {}
    for field_name in ("plural", "singular", "kind", "listKind"):
        if not names.get(field_name):
            errors.append(required(path.child("names", field_name)))
    errors += validate_names(names, path.child("names"))
    any_status = (spec.get("subresources") or {}).get("status") is not None or any(
        (v.get("subresources") or {}).get("status") is not None for v in versions
    )
    if "validation" in spec:
        errors += validate_validation(spec["validation"], any_status, path.child("validation"))
    errors += validate_subresources(spec.get("subresources"), path.child("subresources"))
    for i, column in enumerate(spec.get("additionalPrinterColumns") or []):
        errors += validate_column(column, path.child("additionalPrinterColumns").index(i))
    errors += validate_conversion(spec.get("conversion"), path.child("conversion"))
    return errors


def _enum(path: Path, value: str, accepted: list[str], *, needed: bool) -> list[str]:
    """validation.go validateEnumStrings."""
    if not value:
        return [required(path)] if needed else []
    return [] if value in accepted else [not_supported(path, value, accepted)]


def validate_version(version: dict[str, Any], path: Path, *, status_enabled: bool) -> list[str]:
    """validation.go validateCustomResourceDefinitionVersion."""
    errors = []
    warning = version.get("deprecationWarning")
    if warning is not None:  # validateDeprecationWarning
        if not version.get("deprecated"):
            errors.append(
                invalid(path.child("deprecationWarning"), warning, "can only be set for deprecated versions")
            )
        elif len(warning) > 256 or not warning or not warning.isprintable():
            errors.append(
                invalid(path.child("deprecationWarning"), warning, "must be 1-256 printable characters")
            )
    if version.get("schema"):
        errors += validate_validation(version["schema"], status_enabled, path.child("schema"))
    errors += validate_subresources(version.get("subresources"), path.child("subresources"))
    for i, column in enumerate(version.get("additionalPrinterColumns") or []):
        errors += validate_column(column, path.child("additionalPrinterColumns").index(i))
    if version.get("selectableFields"):
        errors.append(unported(path.child("selectableFields"), "ValidateCustomResourceSelectableFields"))
    return errors


def validate_names(names: dict[str, Any], path: Path) -> list[str]:
    """validation.go ValidateCustomResourceDefinitionNames."""
    errors = []
    for field_name in ("plural", "singular"):
        value = names.get(field_name, "")
        if value and (problems := is_dns1035_label(value)):
            errors.append(invalid(path.child(field_name), value, ",".join(problems)))
    for field_name in ("kind", "listKind"):
        value = names.get(field_name, "")
        if value and (problems := is_dns1035_label(value.lower())):
            detail = "may have mixed case, but should otherwise match: " + ",".join(problems)
            errors.append(invalid(path.child(field_name), value, detail))
    for field_name in ("shortNames", "categories"):
        for i, value in enumerate(names.get(field_name) or []):
            if problems := is_dns1035_label(value):
                errors.append(invalid(path.child(field_name).index(i), value, ",".join(problems)))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errors.append(
            invalid(path.child("listKind"), names["listKind"], "kind and listKind may not be the same")
        )
    return errors


PRINTER_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
PRINTER_COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]


def validate_column(column: dict[str, Any], path: Path) -> list[str]:
    """validation.go ValidateCustomResourceColumnDefinition."""
    errors = []
    if not column.get("name"):
        errors.append(required(path.child("name")))
    kind = column.get("type", "")
    if not kind:
        errors.append(required(path.child("type"), "must be one of " + ",".join(PRINTER_COLUMN_TYPES)))
    elif kind not in PRINTER_COLUMN_TYPES:
        errors.append(invalid(path.child("type"), kind, "must be one of " + ",".join(PRINTER_COLUMN_TYPES)))
    fmt = column.get("format", "")
    if fmt and fmt not in PRINTER_COLUMN_FORMATS:
        errors.append(
            invalid(path.child("format"), fmt, "must be one of " + ",".join(PRINTER_COLUMN_FORMATS))
        )
    json_path = column.get("jsonPath", "")
    if not json_path:
        errors.append(required(path.child("JSONPath")))
    else:
        errors += validate_simple_json_path(json_path, path.child("JSONPath"))
    return errors


def validate_simple_json_path(text: str, path: Path) -> list[str]:
    """validation.go validateSimpleJSONPath."""
    if not text.startswith("."):
        return [invalid(path, text, "must be a simple json path starting with .")]
    return []


def validate_subresources(subresources: dict[str, Any] | None, path: Path) -> list[str]:
    """validation.go ValidateCustomResourceDefinitionSubresources: the scale subresource's paths."""
    scale = (subresources or {}).get("scale")
    if scale is None:
        return []
    errors = []
    for field_name, prefixes in (("specReplicasPath", (".spec.",)), ("statusReplicasPath", (".status.",))):
        value = scale.get(field_name, "")
        where = path.child(f"scale.{field_name}")
        if not value:
            errors.append(required(where))
        elif found := validate_simple_json_path(value, where):
            errors += found
        elif not value.startswith(prefixes):
            errors.append(invalid(where, value, f"should be a json path under {prefixes[0].rstrip('.')}"))
    selector = scale.get("labelSelectorPath")
    if selector:
        where = path.child("scale.labelSelectorPath")
        if found := validate_simple_json_path(selector, where):
            errors += found
        elif not selector.startswith((".spec.", ".status.")):
            errors.append(invalid(where, selector, "should be a json path under either .spec or .status"))
    return errors


def validate_conversion(conversion: dict[str, Any] | None, path: Path) -> list[str]:
    """validation.go validateCustomResourceConversion (strategy None; a webhook is not ported)."""
    if conversion is None:
        return []
    strategy = conversion.get("strategy", "")
    errors = _enum(path.child("strategy"), strategy, ["None", "Webhook"], needed=True)
    if strategy == "Webhook":
        errors.append(
            unported(path.child("webhook"), "a conversion webhook (webhook.ValidateWebhookURL/Service)")
        )
    elif conversion.get("webhook"):
        errors.append(
            forbidden(path.child("webhook"), "should not be set when strategy is not set to Webhook")
        )
    return errors


# ------------------------------------------------------------------------------------------ the schema

# The JSONSchemaProps fields allowed at the root of a schema when the status subresource is enabled
# (validation.go allowedFieldsAtRootSchema, Go field names as JSON names).
ALLOWED_AT_ROOT_WITH_STATUS = {
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
}
OPENAPI_V3_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
META_FIELDS = {"metadata", "kind", "apiVersion"}
VALIDATION_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"]


def is_set(node: dict[str, Any], name: str) -> bool:
    """Whether a field is set as Go sees it: a bool or string field at its zero value, or an empty list or
    map, is the same as absent (omitempty); a pointer field (numbers, `not`, `default`…) is set if present."""
    if name not in node:
        return False
    value = node[name]
    if isinstance(value, bool) and name in _BOOL:
        return value
    if isinstance(value, str | list | dict) and name not in {"default", "example", "not", "items"}:
        return bool(value)
    return True


def validate_validation(validation: dict[str, Any], status_enabled: bool, path: Path) -> list[str]:
    """validation.go validateCustomResourceDefinitionValidation."""
    schema = validation.get("openAPIV3Schema")
    if schema is None:
        return []
    errors = []
    root = path.child("openAPIV3Schema")
    if status_enabled:
        errors += root_with_status(schema, root)
    if schema.get("nullable"):
        errors.append(forbidden(root.child("nullable"), "nullable cannot be true at the root"))

    # Every v1 create requires a structural schema (requireStructuralSchema).
    structural_init = unsupported_fields(schema, root)
    if not structural_init:
        structural = validate_structural(schema, root)
        errors += structural
        if not structural and has_defaults(schema):
            errors.append(unported(root, "checking default values (structuraldefaulting.ValidateDefaults)"))
    errors += validate_openapi_schema(schema, root, _Validator(), is_root=True)
    if not errors:  # NewStructural's errors overlap the OpenAPI ones: shown only when nothing else is
        errors += [invalid(root, "", e) for e in structural_init]
    return errors


def root_with_status(schema: dict[str, Any], root: Path) -> list[str]:
    """The root-field check of validateCustomResourceDefinitionValidation when the status subresource is
    enabled: only fields that still hold once `properties.status` is split off, and type object."""
    for name in schema:
        if not is_set(schema, name):
            continue
        if name == "type" and schema["type"] != "object":
            detail = (
                'only "object" is allowed as the type at the root of the schema if the status subresource'
            )
            return [invalid(root.child("type"), schema["type"], detail + " is enabled")]
        if name not in ALLOWED_AT_ROOT_WITH_STATUS:
            allowed = sorted(ALLOWED_AT_ROOT_WITH_STATUS)
            detail = f"only {allowed} fields are allowed at the root of the schema if the status subresource"
            return [invalid(root, f"…{name}…", detail + " is enabled")]
    return []


def has_defaults(schema: Any) -> bool:
    """validation.go schemaHasDefaults."""
    if not isinstance(schema, dict):
        return False
    if "default" in schema:
        return True
    return any(has_defaults(child) for child in _children(schema))


def _children(schema: dict[str, Any]) -> list[Any]:
    children: list[Any] = []
    for name in ("properties", "patternProperties", "definitions"):
        children += list((schema.get(name) or {}).values())
    for name in ("allOf", "oneOf", "anyOf"):
        children += schema.get(name) or []
    items = schema.get("items")
    children += items if isinstance(items, list) else [items]
    children += [schema.get("not"), schema.get("additionalProperties"), schema.get("additionalItems")]
    return [c for c in children if isinstance(c, dict)]


def unsupported_fields(schema: dict[str, Any], path: Path) -> list[str]:
    """convert.go NewStructural → validateUnsupportedFields, and its refusal of `items` as a list."""
    for name, message in (
        ("id", "OpenAPIV3Schema 'id' is not supported"),
        ("$schema", "OpenAPIV3Schema 'schema' is not supported"),
        ("$ref", "OpenAPIV3Schema '$ref' is not supported"),
        ("patternProperties", "OpenAPIV3Schema 'patternProperties' is not supported"),
        ("dependencies", "OpenAPIV3Schema 'dependencies' is not supported"),
        ("additionalItems", "OpenAPIV3Schema 'additionalItems' is not supported"),
        ("definitions", "OpenAPIV3Schema 'definitions' is not supported"),
    ):
        if is_set(schema, name):
            return [message]
    if isinstance(schema.get("items"), list):
        return ["OpenAPIV3Schema 'items' must be a schema, but is an array"]
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:  # newExtensions
        return ["internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"]
    for child in _children(schema):
        if found := unsupported_fields(child, path):
            return found
    return []


# --- pkg/apiserver/schema: structural schemas

ROOT, ITEM, FIELD = "root", "item", "field"
_TYPE_MISSING = {
    ROOT: "must not be empty at the root",
    ITEM: "must not be empty for specified array items",
    FIELD: "must not be empty for specified object fields",
}
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def validate_structural(schema: dict[str, Any], path: Path) -> list[str]:
    """validation.go ValidateStructural: the invariants, then completeness; sorted as the Go code sorts."""
    errors = structural_invariants(schema, ROOT, path) + structural_completeness(schema, path)
    return sorted(errors)


def _value_validations(node: dict[str, Any]) -> dict[str, Any]:
    """The junctors of a node (its ValueValidation's allOf/anyOf/oneOf/not)."""
    return {k: node[k] for k in ("allOf", "anyOf", "oneOf", "not") if is_set(node, k)}


def structural_invariants(s: dict[str, Any] | None, level: str, path: Path) -> list[str]:
    """validation.go validateStructuralInvariants."""
    if s is None:
        return []
    errors = []
    if s.get("type") == "array" and "items" not in s:
        errors.append(required(path.child("items"), "must be specified"))
    errors += structural_invariants(s.get("items"), ITEM, path.child("items"))
    for name, child in (s.get("properties") or {}).items():
        errors += structural_invariants(child, FIELD, path.child("properties").key(name))
    additional = s.get("additionalProperties")  # `false` is set too (a StructuralOrBool)
    if additional is not None:
        if level == ROOT:
            errors.append(forbidden(path.child("additionalProperties"), "must not be used at the root"))
        if isinstance(additional, dict):
            errors += structural_invariants(additional, FIELD, path.child("additionalProperties"))
    errors += validate_extensions(s, path)

    skip_any_of = s.get("anyOf") == INT_OR_STRING_ANY_OF  # isIntOrStringAnyOfPattern
    all_of = s.get("allOf") or []
    skip_first_all_of_any_of = bool(all_of) and all_of[0].get("anyOf") == INT_OR_STRING_ANY_OF
    errors += value_validation(s, skip_any_of, skip_first_all_of_any_of, level, path)

    embedded = s.get("x-kubernetes-embedded-resource") is True
    check_metadata = level == ROOT or embedded
    kind = s.get("type", "")
    if embedded and kind != "object":
        if not kind:
            errors.append(
                required(path.child("type"), "must be object if x-kubernetes-embedded-resource is true")
            )
        else:
            errors.append(
                invalid(path.child("type"), kind, "must be object if x-kubernetes-embedded-resource is true")
            )
    elif (
        not kind
        and not s.get("x-kubernetes-int-or-string")
        and not s.get("x-kubernetes-preserve-unknown-fields")
    ):
        errors.append(required(path.child("type"), _TYPE_MISSING[level]))
    if embedded and additional is not None:
        errors.append(
            forbidden(
                path.child("additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            )
        )
    if level == ROOT and kind and kind != "object":
        errors.append(invalid(path.child("type"), kind, "must be object at the root"))

    properties = s.get("properties") or {}
    for meta in ("kind", "apiVersion"):
        if meta in properties and check_metadata and properties[meta].get("type", "") != "string":
            errors.append(
                invalid(
                    path.child("properties").key(meta).child("type"),
                    properties[meta].get("type", ""),
                    "must be string",
                )
            )
    if "metadata" in properties:
        errors += structural_metadata_invariants(
            properties["metadata"], check_metadata, level, path.child("properties").key("metadata")
        )
    if embedded and not s.get("x-kubernetes-preserve-unknown-fields") and not properties:
        errors.append(
            required(
                path.child("properties"),
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )
    return errors


def structural_metadata_invariants(
    s: dict[str, Any], check_metadata: bool, level: str, path: Path
) -> list[str]:
    """validation.go validateStructuralMetadataInvariants: at the root, metadata may be typed `object` and may
    say something about `name` and `generateName`, and nothing else — no `required`, no other property, no
    description, no junctor — because the API server owns ObjectMeta's validation."""
    errors = []
    if check_metadata and s.get("type", "") != "object":
        errors.append(invalid(path.child("type"), s.get("type", ""), "must be object"))
    if level == ROOT:
        rest = dict(s)
        properties = set(rest.get("properties") or {})
        if properties and properties <= {"name", "generateName"}:
            rest.pop("properties")
        rest.pop("type", None)
        rest.pop("default", None)  # checked in API validation (defaults are forbidden in top-level metadata)
        # `required: []` too: Go's DeepEqual tells an empty list from none.
        if any(is_set(rest, name) or name == "required" for name in rest):
            errors.append(
                forbidden(
                    path,
                    "must not specify anything other than name and generateName, but metadata is implicitly "
                    "specified",
                )
            )
    return errors


def validate_extensions(s: dict[str, Any], path: Path) -> list[str]:
    """validation.go validateExtensions."""
    errors = []
    if s.get("x-kubernetes-int-or-string") and s.get("x-kubernetes-preserve-unknown-fields"):
        errors.append(
            invalid(
                path.child("x-kubernetes-preserve-unknown-fields"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if s.get("x-kubernetes-int-or-string") and s.get("x-kubernetes-embedded-resource"):
        errors.append(
            invalid(
                path.child("x-kubernetes-embedded-resource"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    return errors


def value_validation(
    v: dict[str, Any], skip_any_of: bool, skip_first_all_of_any_of: bool, level: str, path: Path
) -> list[str]:
    """validation.go validateValueValidation: the junctors below a node, and its pattern."""
    errors = []
    if not skip_any_of:
        for i, clause in enumerate(v.get("anyOf") or []):
            errors += nested_value_validation(clause, False, False, level, path.child("anyOf").index(i))
    for i, clause in enumerate(v.get("allOf") or []):
        errors += nested_value_validation(
            clause, skip_first_all_of_any_of and i == 0, False, level, path.child("allOf").index(i)
        )
    for i, clause in enumerate(v.get("oneOf") or []):
        errors += nested_value_validation(clause, False, False, level, path.child("oneOf").index(i))
    if isinstance(v.get("not"), dict):
        errors += nested_value_validation(v["not"], False, False, level, path.child("not"))
    pattern = v.get("pattern")
    if pattern and (problem := go_regexp_error(pattern)):
        errors.append(
            invalid(
                path.child("pattern"), pattern, f"must be a valid regular expression, but isn't: {problem}"
            )
        )
    return errors


# In a junctor (allOf, anyOf, oneOf, not) these say something about structure: forbidden there.
_NESTED_FORBIDDEN = [
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
]


def nested_value_validation(
    v: dict[str, Any], skip_any_of: bool, skip_all_of_any_of: bool, level: str, path: Path
) -> list[str]:
    """validation.go validateNestedValueValidation."""
    errors = value_validation(v, skip_any_of, skip_all_of_any_of, level, path)
    if isinstance(v.get("items"), dict):
        errors += nested_value_validation(v["items"], False, False, level, path.child("items"))
    for name, child in (v.get("properties") or {}).items():
        errors += nested_value_validation(child, False, False, FIELD, path.child("properties").key(name))
    for name, detail in _NESTED_FORBIDDEN:
        if name == "additionalProperties":
            # newNestedValueValidation: `additionalProperties: false` is nothing; true or a schema is set.
            present = name in v and v[name] is not False
        elif name in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
            present = name in v  # pointers: any value, even "", is set
        else:
            present = is_set(v, name)
        if present:
            errors.append(forbidden(path.child(name), detail))
    if "metadata" in (v.get("properties") or {}):
        errors.append(
            forbidden(path.child("properties").key("metadata"), "must not be specified in a nested context")
        )
    return errors


def structural_completeness(s: dict[str, Any], path: Path) -> list[str]:
    """complete.go validateStructuralCompleteness: whatever the root's junctors name (properties, items) must
    exist in the structural part too. (As in Go, only the root's junctors are walked.)"""
    return value_validation_completeness(s, s, path, path)


def value_validation_completeness(
    v: dict[str, Any], s: dict[str, Any] | None, s_path: Path, v_path: Path
) -> list[str]:
    """complete.go validateValueValidationCompleteness."""
    if not _value_validations(v):
        return []
    if s is None:
        return [required(s_path, f"because it is defined in {v_path}")]
    errors = []
    if isinstance(v.get("not"), dict):
        errors += nested_completeness(v["not"], s, s_path, v_path.child("not"))
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, clause in enumerate(v.get(junctor) or []):
            errors += nested_completeness(clause, s, s_path, v_path.child(junctor).index(i))
    return errors


def nested_completeness(v: dict[str, Any], s: dict[str, Any] | None, s_path: Path, v_path: Path) -> list[str]:
    """complete.go validateNestedValueValidationCompleteness."""
    if s is None:
        return [required(s_path, f"because it is defined in {v_path}")]
    errors = value_validation_completeness(v, s, s_path, v_path)
    if isinstance(v.get("items"), dict):
        errors += nested_completeness(
            v["items"], s.get("items"), s_path.child("items"), v_path.child("items")
        )
    structural_properties = s.get("properties") or {}
    for name, child in (v.get("properties") or {}).items():
        if name not in structural_properties:
            errors.append(
                required(
                    s_path.child("properties").key(name),
                    f"because it is defined in {v_path.child('properties').key(name)}",
                )
            )
        else:
            errors += nested_completeness(
                child,
                structural_properties[name],
                s_path.child("properties").key(name),
                v_path.child("properties").key(name),
            )
    return errors


# --- validation.go: ValidateCustomResourceDefinitionOpenAPISchema


@dataclass(frozen=True)
class _Validator:
    """validation.go specStandardValidatorV3, with a v1 create's options."""

    allow_defaults: bool = True
    disallow_defaults_reason: str = ""
    inside_resource_meta: bool = False

    def forbid_defaults(self, reason: str) -> _Validator:
        return _Validator(False, reason, self.inside_resource_meta)

    def in_resource_meta(self) -> _Validator:
        return _Validator(self.allow_defaults, self.disallow_defaults_reason, True)

    def validate(self, schema: dict[str, Any], path: Path) -> list[str]:
        """specStandardValidatorV3.validate."""
        errors = []
        kind = schema.get("type", "")
        if kind and kind not in OPENAPI_V3_TYPES:
            errors.append(not_supported(path.child("type"), kind, OPENAPI_V3_TYPES))
        if "default" in schema and not self.allow_defaults:
            detail = "must not be set" + (
                f" {self.disallow_defaults_reason}" if self.disallow_defaults_reason else ""
            )
            errors.append(forbidden(path.child("default"), detail))
        if is_set(schema, "id"):
            errors.append(forbidden(path.child("id"), "id is not supported"))
        if "additionalItems" in schema:
            errors.append(forbidden(path.child("additionalItems"), "additionalItems is not supported"))
        if is_set(schema, "patternProperties"):
            errors.append(forbidden(path.child("patternProperties"), "patternProperties is not supported"))
        if is_set(schema, "definitions"):
            errors.append(forbidden(path.child("definitions"), "definitions is not supported"))
        if "dependencies" in schema:
            errors.append(forbidden(path.child("dependencies"), "dependencies is not supported"))
        if "$ref" in schema:
            errors.append(forbidden(path.child("$ref"), "$ref is not supported"))
        if kind == "null":
            errors.append(
                forbidden(path.child("type"), "type cannot be set to null, use nullable as an alternative")
            )
        if isinstance(schema.get("items"), list) and schema["items"]:
            errors.append(forbidden(path.child("items"), "items must be a schema object and not an array"))
        if self.inside_resource_meta and schema.get("x-kubernetes-embedded-resource"):
            errors.append(
                forbidden(
                    path.child("x-kubernetes-embedded-resource"), "must not be used inside of resource meta"
                )
            )
        return errors


def validate_openapi_schema(
    schema: dict[str, Any] | None, path: Path, ssv: _Validator, *, is_root: bool
) -> list[str]:
    """validation.go ValidateCustomResourceDefinitionOpenAPISchema."""
    if schema is None:
        return []
    errors = ssv.validate(schema, path)
    if schema.get("uniqueItems"):
        errors.append(
            forbidden(
                path.child("uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    additional = schema.get("additionalProperties")
    if additional is not None:
        # properties are for structs, additionalProperties for maps: both at once contradicts the API
        # conventions, except `additionalProperties: true`.
        if schema.get("properties") and additional is not True:
            errors.append(
                forbidden(
                    path.child("additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                )
            )
        sub = (
            ssv.forbid_defaults("inside additionalProperties applying to object metadata")
            if ssv.inside_resource_meta
            else ssv
        )
        if isinstance(additional, dict):
            errors += validate_openapi_schema(
                additional, path.child("additionalProperties"), sub, is_root=False
            )
    for name, child in (schema.get("properties") or {}).items():
        sub = ssv
        if (is_root or schema.get("x-kubernetes-embedded-resource")) and name in META_FIELDS:
            sub = sub.in_resource_meta()
            if is_root:
                sub = sub.forbid_defaults(f"in top-level {name}")
        errors += validate_openapi_schema(child, path.child("properties").key(name), sub, is_root=False)
    if isinstance(schema.get("not"), dict):
        errors += validate_openapi_schema(schema["not"], path.child("not"), ssv, is_root=False)
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, clause in enumerate(schema.get(junctor) or []):
            errors += validate_openapi_schema(clause, path.child(junctor).index(i), ssv, is_root=False)
    for name, child in (schema.get("definitions") or {}).items():
        errors += validate_openapi_schema(child, path.child("definitions").key(name), ssv, is_root=False)
    items = schema.get("items")
    if isinstance(items, dict):
        errors += validate_openapi_schema(items, path.child("items"), ssv, is_root=False)
    elif isinstance(items, list):
        for i, item in enumerate(items):
            errors += validate_openapi_schema(item, path.child("items").index(i), ssv, is_root=False)
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        errors.append(
            invalid(path.child("x-kubernetes-preserve-unknown-fields"), False, "must be true or undefined")
        )
    errors += list_and_map_types(schema, path)
    errors += map_list_keys_map_set(schema, path)
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        errors += validation_rule(rule, path.child("x-kubernetes-validations").index(i))
    return errors


def list_and_map_types(schema: dict[str, Any], path: Path) -> list[str]:
    """The x-kubernetes-map-type, -list-type and -list-map-keys checks of
    ValidateCustomResourceDefinitionOpenAPISchema."""
    errors = []
    kind = schema.get("type", "")
    map_type, list_type = schema.get("x-kubernetes-map-type"), schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    items = schema.get("items") if isinstance(schema.get("items"), dict) else None
    if map_type is not None and kind != "object":
        detail = "must be object if x-kubernetes-map-type is specified"
        errors.append(
            required(path.child("type"), detail) if not kind else invalid(path.child("type"), kind, detail)
        )
    if map_type is not None and map_type not in ("atomic", "granular"):
        errors.append(not_supported(path.child("x-kubernetes-map-type"), map_type, ["atomic", "granular"]))
    if list_type is not None and kind != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        errors.append(
            required(path.child("type"), detail) if not kind else invalid(path.child("type"), kind, detail)
        )
    elif list_type == "set" and items is not None:  # requireAtomicSetType
        if items.get("type") == "array" and items.get("x-kubernetes-list-type", "atomic") != "atomic":
            errors.append(
                invalid(
                    path.child("items", "x-kubernetes-list-type"),
                    items["x-kubernetes-list-type"],
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                )
            )
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errors.append(
                invalid(
                    path.child("items", "x-kubernetes-map-type"),
                    items.get("x-kubernetes-map-type"),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                )
            )
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errors.append(
            not_supported(path.child("x-kubernetes-list-type"), list_type, ["atomic", "set", "map"])
        )
    if keys:
        if list_type is None:
            errors.append(
                required(
                    path.child("x-kubernetes-list-type"),
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )
            )
        elif list_type != "map":
            errors.append(
                invalid(
                    path.child("x-kubernetes-list-type"),
                    list_type,
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )
            )
    if list_type == "map":
        if not keys:
            errors.append(
                required(
                    path.child("x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                )
            )
        if "items" not in schema:
            errors.append(
                required(path.child("items"), "must have a schema if x-kubernetes-list-type is map")
            )
        elif items is None:
            errors.append(
                invalid(
                    path.child("items"),
                    schema["items"],
                    "must only have a single schema if x-kubernetes-list-type is map",
                )
            )
        elif items.get("type") != "object":
            errors.append(
                invalid(
                    path.child("items", "type"),
                    items.get("type", ""),
                    "must be object if parent array's x-kubernetes-list-type is map",
                )
            )
        else:
            seen: set[str] = set()
            for key in keys:
                item_property = (items.get("properties") or {}).get(key)
                if item_property is None:
                    errors.append(
                        invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys,
                            "entries must all be names of item properties",
                        )
                    )
                elif item_property.get("type") in ("array", "object"):
                    errors.append(
                        invalid(
                            path.child("items", "properties").key(key).child("type"),
                            items["type"],
                            "must be a scalar type if parent array's x-kubernetes-list-type is map",
                        )
                    )
                if key in seen:
                    errors.append(
                        invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys,
                            "must not contain duplicate entries",
                        )
                    )
                seen.add(key)
    return errors


def map_list_keys_map_set(schema: dict[str, Any], path: Path) -> list[str]:
    """validation.go validateMapListKeysMapSet: set and map items are never null; map keys are required or
    defaulted, and never null."""
    items = schema.get("items")
    list_type = schema.get("x-kubernetes-list-type")
    if not isinstance(items, dict) or list_type not in ("set", "map"):
        return []
    errors = []
    if items.get("nullable"):
        errors.append(
            forbidden(
                path.child("items", "nullable"),
                f"cannot be nullable when x-kubernetes-list-type is {list_type}",
            )
        )
    if list_type == "map":
        for key in schema.get("x-kubernetes-list-map-keys") or []:
            item_property = (items.get("properties") or {}).get(key)
            if item_property is None:
                continue
            where = path.child("items", "properties").key(key)
            if key not in (items.get("required") or []) and "default" not in item_property:
                errors.append(
                    required(
                        where.child("default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a "
                        "required property",
                    )
                )
            if item_property.get("nullable"):
                errors.append(
                    forbidden(
                        where.child("nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    )
                )
    return errors


def validation_rule(rule: dict[str, Any], path: Path) -> list[str]:
    """The x-kubernetes-validations checks of ValidateCustomResourceDefinitionOpenAPISchema; compiling the
    rule (CEL) is not ported."""
    errors = []
    text, message = (rule.get("rule") or "").strip(), rule.get("message") or ""
    if not text:
        errors.append(required(path.child("rule"), "rule is not specified"))
    elif message and not message.strip():
        errors.append(invalid(path.child("message"), message, "must be non-empty if specified"))
    elif re.search(r"[\n\r]", message.strip()):
        errors.append(invalid(path.child("message"), message, "must not contain line breaks"))
    elif re.search(r"[\n\r]", text) and not message.strip():
        errors.append(
            required(path.child("message"), "message must be specified if rule contains line breaks")
        )
    if rule.get("messageExpression") and not str(rule["messageExpression"]).strip():
        errors.append(
            required(path.child("messageExpression"), "messageExpression must be non-empty if specified")
        )
    field_path = rule.get("fieldPath") or ""
    if field_path and not field_path.strip():
        errors.append(invalid(path.child("fieldPath"), field_path, "must be non-empty if specified"))
    if re.search(r"[\n\r]", field_path):
        errors.append(invalid(path.child("fieldPath"), field_path, "must not contain line breaks"))
    if rule.get("reason") is not None and rule["reason"] not in VALIDATION_REASONS:
        errors.append(not_supported(path.child("reason"), rule["reason"], VALIDATION_REASONS))
    errors.append(unported(path.child("rule"), "compiling and costing CEL (cel.Compile)"))
    return errors
