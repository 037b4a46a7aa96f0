"""Validation of rendered custom resources against upstream CRD schemas (the fixtures in crds/, README there).

What the API server does with a custom resource, as far as a test can without one:
1. defaulting: a property's `default` fills it where the object leaves it out (so rules see what the server
   would);
2. the structural schema, as JSON Schema (OpenAPI v3's keywords are JSON Schema draft 4's), strictly: a field
   the schema does not know is an error (the server would drop it, or refuse it under strict field
   validation), except under `x-kubernetes-preserve-unknown-fields`;
3. the `x-kubernetes-validations` CEL rules, each with `self` bound to its node, with a real CEL runtime
   (cel-expr-python, as tests/judges/admission.py uses). Transition rules (`oldSelf`) are skipped: a
   rendered object has no old self. A rule using a Kubernetes CEL library function this runtime lacks fails
   to compile and fails the test, rather than being skipped silently.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from cel_expr_python import cel

CRDS = Path(__file__).parent / "crds"


@cache
def schema_of(api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of this apiVersion and kind, from the fixture that holds it."""
    group, _, version = api_version.rpartition("/")
    path = CRDS / f"{group}_{version}_{kind.lower()}.json"
    document = json.loads(path.read_text())
    assert (document["group"], document["version"], document["kind"]) == (group, version, kind)
    return document["openAPIV3Schema"]  # type: ignore[no-any-return]


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown properties refused wherever it lists properties and does not keep unknowns."""
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict_value(key, value) for key, value in schema.items()}
    keeps_unknown = out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and "additionalProperties" not in out and not keeps_unknown:
        out["additionalProperties"] = False
    return out


def _strict_value(key: str, value: Any) -> Any:
    if key == "properties":
        return {name: _strict(sub) for name, sub in value.items()}
    if key in ("items", "additionalProperties") and isinstance(value, dict):
        return _strict(value)
    if key in ("allOf", "anyOf", "oneOf"):
        return [_strict(sub) for sub in value]
    return value


def defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """The object with the schema's defaults filled in, as the API server defaults before validating."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        out = {}
        for key, item in value.items():
            sub = properties.get(key) or (schema.get("additionalProperties") or {})
            out[key] = defaulted(item, sub if isinstance(sub, dict) else {})
        for key, sub in properties.items():
            if key not in out and "default" in sub:
                out[key] = defaulted(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(value, list):
        return [defaulted(item, schema.get("items") or {}) for item in value]
    return value


@cache
def _env() -> cel.Env:
    return cel.NewEnv(variables={"self": cel.Type.DYN})


def _cel(rule: str) -> str:
    """A CRD rule in standard CEL: `namespace` is reserved in CEL, so CRD rules escape the property as
    `__namespace__` (Kubernetes' property-name escaping); here it becomes a map access."""
    rule = re.sub(r"has\(([\w.]+)\.__namespace__\)", r"('namespace' in \1)", rule)
    return re.sub(r"([\w\]\)]+)\.__namespace__", r"\1['namespace']", rule)


def _rules(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    failures = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        result = _env().compile(_cel(rule["rule"])).eval(data={"self": value})
        if result.type() == cel.Type.ERROR or result.plain_value() is not True:
            failures.append(f"{where}: {rule.get('message') or rule['rule']} ({result.plain_value()})")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key) or schema.get("additionalProperties")
            if isinstance(sub, dict):
                failures += _rules(item, sub, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            failures += _rules(item, schema.get("items") or {}, f"{where}[{index}]")
    return failures


def problems(manifest: dict[str, Any]) -> list[str]:
    """Everything the upstream CRD says is wrong with `manifest`; empty when it would be accepted."""
    schema = schema_of(manifest["apiVersion"], manifest["kind"])
    value = defaulted(manifest, schema)
    validator = jsonschema.Draft4Validator(_strict(schema))
    found = [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in validator.iter_errors(value)
    ]
    return found + _rules(value, schema, manifest["kind"])
