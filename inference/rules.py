"""What an inference endpoint may say: names, where its weights come from, and the engine's arguments.

Pure rules, no database: each refusal is a `ValidationFailed` naming the field, what was wrong and what is
allowed. The services apply them before admission (`inference.services`).

Engine arguments. The platform sets some of vLLM's flags itself, from the endpoint's fields, and a second
value would either be ignored or break the pod: where it listens (`--host`, `--port`, `--uds`: the Service,
the InferencePool and the probes point there), what it serves and under which name (`--model`,
`--served-model-name`, `--revision`: the model fields, which the router matches), `--max-model-len` (the
context length field) and `--api-key` (callers' keys are the gateway's). The parallelism must use exactly
the GPUs the replica asks for: tensor × pipeline parallel size = GPUs per replica.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from gpucloud.errors import ValidationFailed

NAME_RE = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?")
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,199}")
REVISION_RE = re.compile(r"[A-Za-z0-9._/-]{1,100}")
SCHEMES = ("hf", "s3", "gs", "pvc")
SOURCE_RE = {
    # a Hugging Face repository: organisation/name, or name
    "hf": re.compile(r"hf://([A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}"),
    # a bucket (DNS-like) and a key
    "s3": re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,62}(/[A-Za-z0-9._/-]+)?"),
    "gs": re.compile(r"gs://[a-z0-9][a-z0-9._-]{1,221}(/[A-Za-z0-9._/-]+)?"),
    # a PersistentVolumeClaim of the tenant's namespace, and a directory in it
    "pvc": re.compile(r"pvc://[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(/[A-Za-z0-9._-]+)*"),
}
SOURCE_EXAMPLES = "hf://org/model, s3://bucket/path, gs://bucket/path, pvc://claim/path"

# Flags the platform sets (module docstring), with what sets each.
PLATFORM_FLAGS = {
    "--host": "the platform listens on 0.0.0.0, where the Service and the InferencePool reach it",
    "--port": "the platform listens on port 8000, where the Service, InferencePool and probes reach it",
    "--uds": "the platform serves over TCP on port 8000",
    "--model": "the model comes from source_uri",
    "--served-model-name": "set it with served_model_name",
    "--revision": "set it with revision",
    "--max-model-len": "set it with context_length",
    "--api-key": "callers' keys are checked by the gateway, not the engine",
}
TENSOR_FLAGS = ("--tensor-parallel-size", "-tp")
PIPELINE_FLAGS = ("--pipeline-parallel-size", "-pp")
MAX_ARGS, MAX_ARG_LENGTH = 64, 500
MAX_GPUS_PER_REPLICA, MAX_REPLICAS, MAX_CONTEXT = 64, 64, 10_485_760
MAX_PRICE = Decimal("1000000")


def name(value: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ValidationFailed.on(
            "name",
            f"{value!r} is not a valid endpoint name: use 1-40 lowercase letters, digits and hyphens, "
            "starting with a letter and not ending with a hyphen (a DNS label)",
        )
    return value


def model_name(field: str, value: str) -> str:
    if not isinstance(value, str) or not MODEL_RE.fullmatch(value):
        raise ValidationFailed.on(
            field,
            f"{value!r} is not a valid {field}: 1-200 letters, digits and . _ / : -, starting with a letter "
            "or digit (e.g. meta-llama/Llama-3.1-8B-Instruct)",
        )
    return value


def revision(value: str) -> str:
    if value and not REVISION_RE.fullmatch(value):
        raise ValidationFailed.on(
            "revision",
            f"{value!r} is not a valid revision: a branch, tag or commit (letters, digits, . _ / -)",
        )
    return value


def source_uri(value: str) -> str:
    """A source of a scheme the platform loads from, well formed for that scheme."""
    scheme = value.partition("://")[0] if isinstance(value, str) and "://" in value else ""
    if scheme not in SOURCE_RE:
        raise ValidationFailed.on(
            "source_uri",
            f"{value!r} is not a source the platform can load: the scheme must be one of "
            f"{', '.join(s + '://' for s in SCHEMES)} (e.g. {SOURCE_EXAMPLES})",
        )
    if not SOURCE_RE[scheme].fullmatch(value) or ".." in value.split("/"):
        raise ValidationFailed.on(
            "source_uri", f"{value!r} is not a well-formed {scheme}:// source (e.g. {SOURCE_EXAMPLES})"
        )
    return value


def count(field: str, value: object, *, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValidationFailed.on(
            field, f"{field} must be a whole number from {minimum} to {maximum}, not {value!r}"
        )
    return value


def replicas(minimum: int, maximum: int) -> None:
    """0 ≤ min ≤ max, max ≥ 1 (a minimum of 0 scales to zero when idle)."""
    count("min_replicas", minimum, minimum=0, maximum=MAX_REPLICAS)
    count("max_replicas", maximum, minimum=1, maximum=MAX_REPLICAS)
    if minimum > maximum:
        raise ValidationFailed.on(
            "min_replicas", f"min_replicas ({minimum}) must not exceed max_replicas ({maximum})"
        )


def gpus_per_replica(value: int, kind: str, gpu_class: str) -> int:
    """Whole GPUs: 1 to 64, the engine's parallelism spans them. A MIG slice, a time-slice or a HAMi
    fraction is one device that vLLM cannot split a model over (NCCL does not run across MIG slices or
    shares of one GPU), so one per replica."""
    count("gpus_per_replica", value, minimum=1, maximum=MAX_GPUS_PER_REPLICA)
    if kind != "whole" and value != 1:
        raise ValidationFailed.on(
            "gpus_per_replica",
            f"{gpu_class} is a {kind} class: a replica gets one unit of it (vLLM cannot spread a model over "
            "several MIG slices or GPU shares); for more, choose a larger slice or whole GPUs",
        )
    return value


def _flag_of(arg: str) -> tuple[str, str | None]:
    flag, equals, value = arg.partition("=")
    return flag, value if equals else None


def _values(args: Sequence[str], flags: tuple[str, ...]) -> list[str]:
    """Every value given to one of `flags`, as `--flag=value` or `--flag value`."""
    found = []
    for index, arg in enumerate(args):
        flag, value = _flag_of(arg)
        if flag in flags:
            found.append(value if value is not None else (args[index + 1] if index + 1 < len(args) else ""))
    return found


def _size(flag: str, values: list[str]) -> int:
    if len(values) > 1:
        raise ValidationFailed.on("engine_args", f"{flag} is given {len(values)} times; give it once")
    if not values:
        return 0
    if not values[0].isdigit() or int(values[0]) < 1:
        raise ValidationFailed.on(
            "engine_args", f"{flag} must be a whole number of at least 1, not {values[0]!r}"
        )
    return int(values[0])


def engine_args(args: object, gpus: int) -> list[str]:
    """A list of strings without the platform's own flags, whose parallelism uses exactly `gpus` GPUs."""
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValidationFailed.on(
            "engine_args", 'engine_args must be a list of strings, e.g. ["--dtype=bfloat16"]'
        )
    if len(args) > MAX_ARGS or any(len(a) > MAX_ARG_LENGTH or not a or "\0" in a for a in args):
        raise ValidationFailed.on(
            "engine_args",
            f"engine_args holds at most {MAX_ARGS} non-empty strings of at most {MAX_ARG_LENGTH} characters",
        )
    for arg in args:
        flag, _ = _flag_of(arg)
        if flag in PLATFORM_FLAGS:
            raise ValidationFailed.on(
                "engine_args",
                f"{flag} is set by the platform, so engine_args may not give it: {PLATFORM_FLAGS[flag]}",
            )
    tensor = _size("--tensor-parallel-size", _values(args, TENSOR_FLAGS))
    pipeline = _size("--pipeline-parallel-size", _values(args, PIPELINE_FLAGS))
    if (tensor or pipeline) and (tensor or 1) * (pipeline or 1) != gpus:
        raise ValidationFailed.on(
            "engine_args",
            f"tensor parallel size {tensor or 1} × pipeline parallel size {pipeline or 1} must equal "
            f"gpus_per_replica ({gpus}): each replica gets exactly {gpus} GPUs; leave both out and the "
            f"platform sets --tensor-parallel-size {gpus}",
        )
    return list(args)


def context_length(value: int | None) -> int | None:
    if value is None:
        return None
    return count("context_length", value, minimum=1, maximum=MAX_CONTEXT)


def price(visibility: str, value: Decimal | None) -> Decimal | None:
    """A published endpoint has a price per million tokens (0 is free); a tenant's own has none."""
    if visibility == "published":
        if value is None:
            raise ValidationFailed.on(
                "price_per_million_tokens",
                "a published endpoint needs a price_per_million_tokens (0 or more)",
            )
        if not Decimal(0) <= value <= MAX_PRICE:
            raise ValidationFailed.on(
                "price_per_million_tokens",
                f"price_per_million_tokens must be from 0 to {MAX_PRICE}, not {value}",
            )
        return value
    if value is not None:
        raise ValidationFailed.on(
            "price_per_million_tokens", "only a published endpoint has a price; set visibility to published"
        )
    return None
