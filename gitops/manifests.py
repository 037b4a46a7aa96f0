"""Manifests: YAML documents of kind Tenant, RateCard and HostCluster, their JSON Schemas, and how a file (or
a folder, or a git commit) becomes a list of validated documents whose every field knows its line.

Validation here is by schema only (shape, types, ranges); what needs the database (capacity, trust tiers,
users, host clusters) is checked by the services `gitops.apply` calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from billing import money
from gpucloud.api.parsers import MAX_DEPTH
from gpucloud.limits import integer_range
from tenants.models import SLUG_RE, Membership, Quota, Tenant

API_VERSION = "gpucloud.io/v1alpha1"
SUFFIXES = (".yaml", ".yml", ".json")
# A username (Django's rule, without "@") or an e-mail address: anything else is neither.
USERNAME_RE = r"^[\w.+-]{1,150}$"
EMAIL_RE = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
NAME_RE = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
# An error quotes at most this much of a value, and says at most this much in all: a 60 MB value must not come
# back in the answer, the source's error and its problems (issue 24).
QUOTE_LIMIT = 80
REASON_LIMIT = 400


def _count(name: str, minimum: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": integer_range(Quota, name)[1]}


def _object(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _document(kind: str, name_pattern: str, spec: dict[str, Any], description: str) -> dict[str, Any]:
    metadata = _object({"name": {"type": "string", "pattern": name_pattern}}, ["name"])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://gpucloud.io/schemas/{API_VERSION}/{kind}",
        "title": kind,
        "description": description,
        **_object(
            {
                "apiVersion": {"const": API_VERSION},
                "kind": {"const": kind},
                "metadata": metadata,
                "spec": spec,
            },
            ["apiVersion", "kind", "metadata", "spec"],
        ),
    }


MEMBER = _object(
    {
        "user": {
            "type": "string",
            "anyOf": [{"pattern": USERNAME_RE}, {"pattern": EMAIL_RE}],
            "description": "a username, or the e-mail address of someone who is invited until they sign in",
        },
        "role": {"enum": list(Membership.Role.values)},
    },
    ["user", "role"],
)
QUOTA = _object(
    {
        "gpuClass": {"type": "string", "minLength": 1, "maxLength": 60},
        "guaranteed": _count("guaranteed"),
        "burst": _count("burst"),
        "lendable": {"anyOf": [_count("lendable"), {"type": "null"}]},
        "weight": _count("weight", minimum=1),
    },
    ["gpuClass", "guaranteed"],
)
BUDGET = _object(
    {
        "monthly": money.BUDGET.schema(),
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "enforce": {"type": "boolean"},
        "email": {"type": "string", "anyOf": [{"maxLength": 0}, {"pattern": EMAIL_RE}]},
    },
    ["monthly"],
)
# Hours, minutes, seconds (`tenants.services.sleep.SLEEP_DELAY_RE`, written without look-ahead: the CRD's
# pattern is checked by the API server's RE2); the one-minute minimum is checked by `gitops.apply` and the
# service.
SLEEP_DELAY_PATTERN = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
SLEEP = _object(
    {
        "whenIdle": {
            "type": "boolean",
            "description": "put the cluster to sleep when metering finds its GPUs idle (default false)",
        },
        "afterInactivity": {
            "type": "string",
            "maxLength": 20,
            "pattern": SLEEP_DELAY_PATTERN,
            "description": 'vCluster sleep mode delay, e.g. "4h", "45m", "1h30m" (at least a minute); '
            "empty = the host cluster's default",
        },
    }
)

SCHEMAS: dict[str, dict[str, Any]] = {
    "Tenant": _document(
        "Tenant",
        SLUG_RE,
        _object(
            {
                "displayName": {"type": "string", "minLength": 1, "maxLength": 200},
                "trustTier": {"enum": list(Tenant.TrustTier.values)},
                "hostCluster": {"type": "string", "pattern": NAME_RE},
                "members": {"type": "array", "items": MEMBER},
                "quotas": {"type": "array", "items": QUOTA},
                "budget": BUDGET,
                "sleep": SLEEP,
            }
        ),
        "A tenant, its members, quotas, budget and sleep settings. A list that is given is the whole list; "
        "a field left out is not managed.",
    ),
    "RateCard": _document(
        "RateCard",
        NAME_RE,
        _object(
            {
                "effectiveFrom": {"type": "string", "format": "date-time"},
                "effectiveUntil": {
                    "type": "string",
                    "format": "date-time",
                    "description": "retires the card: it no longer applies from then on (the card before "
                    "it applies again)",
                },
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "prices": {
                    "type": "object",
                    "additionalProperties": money.PRICE.schema(),
                    "minProperties": 1,
                },
                "tierMultipliers": _object(
                    {tier: money.MULTIPLIER.schema() for tier in Tenant.TrustTier.values}
                ),
                "note": {"type": "string", "maxLength": 200},
            },
            ["effectiveFrom", "prices"],
        ),
        "A rate card. Cards are never edited: a changed spec becomes a new version under the same name; "
        "effectiveUntil alone retires the newest version.",
    ),
    "HostCluster": _document(
        "HostCluster",
        NAME_RE,
        _object(
            {
                "driver": {"enum": ["simulated", "kubernetes"]},
                "scheduler": {"enum": ["kueue", "kai"]},
                "vclusterMode": {"enum": ["helmrelease", "platform"]},
                "region": {"type": "string", "maxLength": 63},
                "endpointBase": {"type": "string", "maxLength": 300},
                "topologyLevels": {"type": "array", "items": {"type": "string", "minLength": 1}},
            }
        ),
        "A registered host cluster's settings, without credentials: registration (with its kubeconfig) or a "
        "fleet file creates it; a manifest keeps its region, endpoint base and topology levels.",
    ),
}
KINDS = tuple(sorted(SCHEMAS))
MONEY_PATTERNS = {kind.pattern: kind for kind in money.KINDS}
VALIDATORS = {kind: Draft202012Validator(schema) for kind, schema in SCHEMAS.items()}


def quote(value: Any) -> str:
    """`repr(value)`, cut to QUOTE_LIMIT characters (saying how long it was)."""
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else f"{text[:QUOTE_LIMIT]}… ({len(text)} characters)"


def clip(text: str, limit: int = REASON_LIMIT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest: where (file, line, field) and why. Each part is clipped, whatever
    raised it (a schema, a service, YAML), so no problem carries a value of unbounded length."""

    file: str
    line: int | None
    field: str
    reason: str

    def __post_init__(self) -> None:
        for name in ("file", "field", "reason"):
            object.__setattr__(self, name, clip(getattr(self, name)))

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "reason": self.reason}


class ManifestInvalid(Exception):
    """Manifests that cannot be applied; nothing of them was."""

    def __init__(self, problems: list[Problem], status: int = 400) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems
        self.status = status  # a service's refusal keeps its status (403, 409, 422 …); bad documents are 400


@dataclass
class Document:
    """One manifest, where it came from, and the line of each of its fields (paths like `spec.quotas[0]`)."""

    body: dict[str, Any]
    file: str
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name", ""))

    @property
    def spec(self) -> dict[str, Any]:
        return self.body.get("spec") or {}

    def line(self, path: str) -> int | None:
        """The line of `path`, or of the nearest enclosing field that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = re.sub(r"(\.[^.\[]+|\[\d+\])$", "", path) if re.search(r"[.\[]", path) else ""
        return self.lines.get("")

    def problem(self, path: str, reason: str) -> Problem:
        return Problem(self.file, self.line(path), path, reason)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def _walk(
    node: yaml.Node,
    path: str,
    lines: dict[str, int],
    problems: list[tuple[int, str, str]],
    seen_nodes: set[int] | None = None,
) -> None:
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        # An alias: manifests need none, and nested aliases make a few lines expand to billions of nodes.
        problems.append(
            (node.start_mark.line + 1, path, "YAML anchors and aliases are not allowed in manifests")
        )
        return
    if isinstance(node, yaml.CollectionNode):
        seen_nodes.add(id(node))
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                problems.append((key.start_mark.line + 1, path, f"the key {name!r} appears twice"))
            seen.add(name)
            child = f"{path}.{name}" if path else name
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines, problems, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, f"{path}[{index}]", lines, problems, seen_nodes)


class TooDeep(yaml.MarkedYAMLError):
    """A document nested more than MAX_DEPTH levels."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document nested more than MAX_DEPTH levels while composing it: the
    composer recurses once a level, so one 50,000 levels deep would end in RecursionError (the parser and
    scanner before it keep their state in lists and do not recurse)."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.depth >= MAX_DEPTH:
            # types-PyYAML leaves peek_event unannotated
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise TooDeep(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def decode(data: str | bytes, file: str) -> str:
    """A file's text: manifests are UTF-8 (a BOM is allowed); anything else is a `ManifestInvalid`."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestInvalid(
            [
                Problem(
                    file,
                    line,
                    "",
                    f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                    "manifests are UTF-8",
                )
            ]
        ) from None


def parse(text: str | bytes, file: str) -> list[Document]:
    """The documents of one YAML (or JSON) text; a syntax error, a repeated key, nesting deeper than
    MAX_DEPTH, a value YAML cannot construct (`2024-13-45`) or bytes that are not UTF-8 are a
    `ManifestInvalid`, never an exception of their own."""
    documents, problems = [], []
    loader = _Loader(decode(text, file))
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[str, int] = {}
            repeated: list[tuple[int, str, str]] = []
            _walk(node, "", lines, repeated)
            problems += [Problem(file, line, path, reason) for line, path, reason in repeated]
            if repeated:
                continue  # not constructed: an alias bomb would expand here
            try:
                body = loader.construct_document(node)
            except (ValueError, TypeError, AttributeError) as exc:  # PyYAML's constructors raise these
                problems.append(Problem(file, lines.get(""), "", f"a value cannot be read: {exc}"))
                # what construct_document clears when it finishes, so the next document starts clean
                loader.constructed_objects, loader.recursive_objects, loader.state_generators = {}, {}, []
                continue
            if body is None:
                continue
            if not isinstance(body, dict):
                problems.append(
                    Problem(file, lines.get(""), "", "a manifest is a mapping with apiVersion, kind…")
                )
                continue
            documents.append(Document(body, file, lines))
    except TooDeep as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        problems.append(Problem(file, line, "", f"{exc.problem}; a manifest needs a handful"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problems.append(Problem(file, line, "", f"not valid YAML: {getattr(exc, 'problem', None) or exc}"))
    finally:
        loader.dispose()
    if problems:
        raise ManifestInvalid(problems)
    return documents


def _schema_problems(document: Document) -> list[Problem]:
    kind, version = document.body.get("kind"), document.body.get("apiVersion")
    if version != API_VERSION:
        return [document.problem("apiVersion", f"{version!r} is not supported; use {API_VERSION}")]
    if kind not in VALIDATORS:
        return [document.problem("kind", f"unknown kind {kind!r}; known: {', '.join(KINDS)}")]
    problems = []
    for error in sorted(VALIDATORS[kind].iter_errors(document.body), key=lambda e: list(e.absolute_path)):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        # jsonschema's message starts with the whole value: quote it short.
        reason = error.message.replace(repr(error.instance), quote(error.instance), 1)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {}))
            extra = sorted(str(key) for key in set(error.instance) - allowed)
            if extra:
                path = f"{path}.{clip(extra[0], QUOTE_LIMIT)}".lstrip(".")
                reason = (
                    f"{quote(extra[0])} is not a field of {kind}; allowed here: {', '.join(sorted(allowed))}"
                )
        elif error.validator == "pattern" and path.endswith("sleep.afterInactivity"):
            reason = (
                f"{quote(error.instance)} is not a delay; write it like 45m, 2h or 1h30m, or leave it empty"
            )
        elif error.validator == "anyOf" and path.endswith(".user"):
            reason = f"{quote(error.instance)} is neither a username nor an e-mail address"
        elif error.validator == "pattern" and error.validator_value in MONEY_PATTERNS:
            reason = _money_reason(MONEY_PATTERNS[error.validator_value], error.instance)
        problems.append(document.problem(path, reason))
    return problems


def _money_reason(kind: money.Money, value: Any) -> str:
    """Why an amount is refused: the money type's own words, or that a manifest writes plain digits."""
    try:
        kind.checked(value)
    except ValueError as exc:
        return str(exc)
    return kind.refusal(value, "is not written as plain digits (like 12.50)")


def validate(documents: list[Document]) -> None:
    """Check every document against its kind's schema, and that no object is declared twice."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str], Document] = {}
    for document in documents:
        found = _schema_problems(document)
        problems += found
        key = (document.kind, document.name)
        if not found and key in seen:
            first = seen[key]
            problems.append(
                document.problem(
                    "metadata.name", f"{document} is declared twice (also {first.file}:{first.line('')})"
                )
            )
        seen.setdefault(key, document)
    if problems:
        raise ManifestInvalid(problems)


def read_path(path: Path) -> list[Document]:
    """Every manifest in a file, or in a folder's *.yaml, *.yml and *.json files (recursively, sorted)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    elif path.is_file():
        files = [path]
    else:
        raise ManifestInvalid([Problem(str(path), None, "", "no such file or folder")])
    texts, problems = [], []
    for file in files:
        try:
            texts.append((str(file), file.read_bytes()))
        except OSError as exc:
            problems.append(Problem(str(file), None, "", f"cannot be read: {exc.strerror}"))
    if problems:
        raise ManifestInvalid(problems)
    return read_texts(texts)


def read_texts(
    texts: Iterable[tuple[str, str | bytes]], *, check: Callable[[], None] = lambda: None
) -> list[Document]:
    """Parse and validate (file name, text or UTF-8 bytes) pairs; every problem of every file is reported
    at once. `check` runs before each file (a sync's deadline raises from it)."""
    documents: list[Document] = []
    problems: list[Problem] = []
    for file, text in texts:
        check()
        try:
            documents += parse(text, file)
        except ManifestInvalid as exc:
            problems += exc.problems
    try:
        validate(documents)
    except ManifestInvalid as exc:
        problems += exc.problems
    if problems:
        raise ManifestInvalid(problems)
    return documents


def from_bodies(bodies: list[Any], file: str = "request") -> list[Document]:
    """Documents sent as JSON (the API): the `file` of the n-th is `request[n]`."""
    documents = []
    problems = []
    for index, body in enumerate(bodies):
        if isinstance(body, dict):
            documents.append(Document(body, f"{file}[{index}]"))
        else:
            problems.append(
                Problem(f"{file}[{index}]", None, "", "a manifest is an object with apiVersion, kind…")
            )
    if problems:
        raise ManifestInvalid(problems)
    validate(documents)
    return documents
