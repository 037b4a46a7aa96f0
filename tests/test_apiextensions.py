"""The port of the API server's CRD validation (tests/apiextensions.py) refuses what a real API server
refuses, in its words, and accepts what it accepts: the cases follow the Go tests of
k8s.io/apiextensions-apiserver (pkg/apiserver/schema/validation_test.go and complete_test.go,
pkg/apis/apiextensions/validation/validation_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops.crds import crd
from tests.apiextensions import refusals

ROOT = "spec.validation.openAPIV3Schema"
METADATA_ONLY_NAME = (
    f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
    "but metadata is implicitly specified"
)


def definition(schema: dict[str, Any], **version: Any) -> dict[str, Any]:
    """A CRD `widgets.example.com` with one version whose schema has `spec: <schema>`."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": schema}},
                    },
                    **version,
                }
            ],
        },
    }


def with_root(**root: Any) -> dict[str, Any]:
    """A CRD whose root schema gets `root`'s fields."""
    made = definition({"type": "object"})
    made["spec"]["versions"][0]["schema"]["openAPIV3Schema"].update(root)
    return made


def test_a_structural_crd_is_accepted():
    assert refusals(definition({"type": "object", "properties": {"size": {"type": "integer"}}})) == []


def test_the_tenant_crd_as_first_shipped_is_refused_for_requiring_a_name_under_metadata():
    shipped = crd("Tenant")
    schema = shipped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["metadata"]["required"] = ["name"]  # what deploy/kubernetes/crds/ held
    assert refusals(shipped) == [METADATA_ONLY_NAME]


@pytest.mark.parametrize("kind", ["Tenant", "RateCard"])
def test_the_generated_crds_are_accepted(kind):
    assert refusals(crd(kind)) == []


@pytest.mark.parametrize(
    "metadata",
    [
        {"type": "object"},
        {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40}},
        },
        {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}},
    ],
)
def test_metadata_may_restrict_its_name_and_generate_name(metadata):
    assert refusals(with_root(properties={"metadata": metadata})) == []


@pytest.mark.parametrize(
    "metadata",
    [
        {"type": "object", "required": ["name"]},
        {"type": "object", "required": []},
        {"type": "object", "properties": {"labels": {"type": "object"}}},
        {"type": "object", "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}},
        {"type": "object", "description": "the object's metadata"},
        {"type": "object", "minProperties": 1},
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    ],
)
def test_metadata_may_say_nothing_else(metadata):
    assert METADATA_ONLY_NAME in refusals(with_root(properties={"metadata": metadata}))


def test_metadata_is_an_object_and_never_named_in_a_junctor():
    assert f'{ROOT}.properties[metadata].type: Invalid value: "string": must be object' in refusals(
        with_root(properties={"metadata": {"type": "string"}})
    )
    nested = with_root(anyOf=[{"properties": {"metadata": {"required": ["name"]}}}])
    assert (
        f"{ROOT}.anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"
        in refusals(nested)
    )


def test_every_node_has_a_type_unless_it_is_int_or_string_or_preserves_unknown_fields():
    untyped = definition({"type": "object", "properties": {"a": {}, "list": {"type": "array", "items": {}}}})
    assert refusals(untyped) == [
        f"{ROOT}.properties[spec].properties[a].type: Required value: must not be empty for specified object "
        "fields",
        f"{ROOT}.properties[spec].properties[list].items.type: Required value: must not be empty for "
        "specified array items",
    ]
    exempt = definition(
        {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "anything": {"x-kubernetes-preserve-unknown-fields": True},
            },
        }
    )
    assert refusals(exempt) == []
    assert f"{ROOT}.type: Required value: must not be empty at the root" in refusals(with_root(type=""))


def test_an_array_names_its_items():
    assert refusals(definition({"type": "array"})) == [
        f"{ROOT}.properties[spec].items: Required value: must be specified"
    ]


@pytest.mark.parametrize(
    ("clause", "field", "detail"),
    [
        ({"type": "string"}, "type", "must be empty to be structural"),
        ({"description": "x"}, "description", "must be empty to be structural"),
        ({"title": "x"}, "title", "must be empty to be structural"),
        ({"nullable": True}, "nullable", "must be false to be structural"),
        ({"default": "x"}, "default", "must be undefined to be structural"),
        ({"additionalProperties": True}, "additionalProperties", "must be undefined to be structural"),
        (
            {"x-kubernetes-list-type": "atomic"},
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
    ],
)
def test_a_junctor_holds_value_validations_only(clause, field, detail):
    schema = {"type": "string", "anyOf": [{"pattern": "^a"}, clause]}
    assert f"{ROOT}.properties[spec].anyOf[1].{field}: Forbidden: {detail}" in refusals(definition(schema))


def test_int_or_string_may_type_its_any_of():
    schema = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert refusals(definition(schema)) == []
    swapped = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert f"{ROOT}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural" in refusals(
        definition(swapped)
    )


def test_what_the_roots_junctors_name_must_exist_in_the_structure():
    made = with_root(anyOf=[{"properties": {"ghost": {"minLength": 1}}}])
    assert refusals(made) == [
        f"{ROOT}.properties[ghost]: Required value: because it is defined in "
        f"{ROOT}.anyOf[0].properties[ghost]"
    ]
    named = with_root(anyOf=[{"required": ["spec"]}, {"properties": {"spec": {"minProperties": 1}}}])
    assert refusals(named) == []


def test_additional_properties_never_at_the_root_nor_beside_properties_except_true():
    assert f"{ROOT}.additionalProperties: Forbidden: must not be used at the root" in refusals(
        with_root(additionalProperties=False)
    )
    both: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": {"type": "string"},
    }
    assert refusals(definition(both)) == [
        f"{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are "
        "mutual exclusive"
    ]
    both["additionalProperties"] = True
    assert refusals(definition(both)) == []
    assert refusals(definition({"type": "object", "additionalProperties": {"type": "string"}})) == []


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"type": "null"}, "type: Forbidden: type cannot be set to null, use nullable as an alternative"),
        ({"type": "string", "$ref": "#/x"}, "$ref: Forbidden: $ref is not supported"),
        (
            {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
            "patternProperties: Forbidden: patternProperties is not supported",
        ),
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes "
            "quadratic",
        ),
        (
            {"type": "array", "items": [{"type": "string"}]},
            "items: Forbidden: items must be a schema object and not an array",
        ),
        (
            {"type": "string", "pattern": "^(?!admin)"},
            'pattern: Invalid value: "^(?!admin)": must be a valid regular expression, but isn\'t: invalid '
            "perl operator: (?!",
        ),
    ],
)
def test_what_openapi_allows_and_kubernetes_does_not(schema, error):
    assert f"{ROOT}.properties[spec].{error}" in refusals(definition(schema))


def test_a_field_kubernetes_does_not_know_refuses_the_whole_object():
    assert refusals(definition({"type": "string", "const": "x"})) == [
        'unknown field "spec.versions[0].schema.openAPIV3Schema.properties[spec].const"'
    ]
    assert refusals(definition({"type": ["string", "null"]})) == [
        'spec.versions[0].schema.openAPIV3Schema.properties[spec].type: cannot decode ["string", "null"] as '
        "a string"
    ]


def test_list_maps_have_required_scalar_keys_and_sets_have_atomic_items():
    conditions = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "properties": {"type": {"type": "string"}}},
    }
    assert refusals(definition(conditions)) == [
        f"{ROOT}.properties[spec].items.properties[type].default: Required value: this property is in "
        "x-kubernetes-list-map-keys, so it must have a default or be a required property"
    ]
    conditions["items"]["required"] = ["type"]
    assert refusals(definition(conditions)) == []
    no_keys = {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}}
    assert (
        f"{ROOT}.properties[spec].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map"
    ) in refusals(definition(no_keys))
    objects_set = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}}
    assert (
        f"{ROOT}.properties[spec].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item "
        "of a list with x-kubernetes-list-type=set"
    ) in refusals(definition(objects_set))


def test_with_a_status_subresource_the_root_holds_only_what_survives_splitting_off_status():
    made = with_root(anyOf=[{"required": ["spec"]}])
    assert refusals(made) == []
    made["spec"]["versions"][0]["subresources"] = {"status": {}}
    (error,) = refusals(made)
    assert error.startswith(f'{ROOT}: Invalid value: "…anyOf…": only [')
    assert error.endswith("fields are allowed at the root of the schema if the status subresource is enabled")


def test_the_name_is_plural_dot_group_and_the_names_are_dns_labels():
    made = definition({"type": "object"})
    made["metadata"]["name"] = "widget.example.com"
    made["spec"]["names"] |= {"kind": "Widget", "listKind": "Widget", "shortNames": ["Wdg"]}
    assert refusals(made) == [
        'metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group',
        'spec.names.shortNames[0]: Invalid value: "Wdg": a DNS-1035 label must consist of lower case '
        "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric "
        "character",
        'spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same',
    ]
    made = definition({"type": "object"})
    made["spec"]["group"] = "example"
    assert 'spec.group: Invalid value: "example": should be a domain with at least one dot' in refusals(made)


def test_printer_columns_have_a_known_type_and_a_simple_json_path():
    made = definition(
        {"type": "object"},
        additionalPrinterColumns=[{"name": "Size", "type": "float", "jsonPath": "spec.size"}],
    )
    assert refusals(made) == [
        'spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of '
        "boolean,date,integer,number,string",
        'spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.size": must be a simple json path '
        "starting with .",
    ]


def test_versions_with_different_schemas_are_reported_per_version():
    made = definition({"type": "object"})
    second = copy.deepcopy(made["spec"]["versions"][0]) | {"name": "v2", "storage": False}
    second["schema"]["openAPIV3Schema"]["properties"]["spec"] = {"type": "object", "required": ["x"]}
    second["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {"type": "object", "required": ["name"]}
    made["spec"]["versions"].append(second)
    assert refusals(made) == [
        "spec.versions[1].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything "
        "other than name and generateName, but metadata is implicitly specified"
    ]
    made["spec"]["versions"][1]["storage"] = True
    assert "must have exactly one version marked as storage version" in refusals(made)[-1]


def test_what_the_port_cannot_check_is_refused_not_passed():
    rule = with_root(**{"x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 40"}]})
    assert refusals(rule) == [
        f"{ROOT}.x-kubernetes-validations[0].rule: Not checked: compiling and costing CEL (cel.Compile) is "
        "not ported (tests/apiextensions.py); extend the port first"
    ]
    defaulted = definition({"type": "string", "default": "x"})
    assert refusals(defaulted)[0].startswith(f"{ROOT}: Not checked: checking default values")
