"""The rules of what an inference endpoint may say (inference/rules.py): each refusal names the field, what
was wrong and what is allowed."""

from decimal import Decimal

import pytest

from gpucloud.errors import ValidationFailed
from inference import rules


def refusal(call, *args):
    with pytest.raises(ValidationFailed) as caught:
        call(*args)
    (field,) = caught.value.errors
    return field, caught.value.detail


@pytest.mark.parametrize(
    "uri",
    [
        "hf://meta-llama/Llama-3.1-8B-Instruct",
        "hf://gpt2",
        "s3://models/llama/8b",
        "gs://my-bucket/q",
        "pvc://weights/llama",
    ],
)
def test_it_accepts_sources_of_every_scheme_it_loads(uri):
    assert rules.source_uri(uri) == uri


@pytest.mark.parametrize(
    "uri", ["file:///etc/passwd", "http://example.com/model", "meta-llama/Llama", "", "ftp://x/y"]
)
def test_it_refuses_a_source_of_another_scheme_listing_the_allowed_ones(uri):
    field, detail = refusal(rules.source_uri, uri)
    assert field == "source_uri"
    assert "hf://, s3://, gs://, pvc://" in detail


@pytest.mark.parametrize(
    "uri", ["hf://", "hf://a/b/c", "pvc://Claim/x", "s3://b/../etc", "pvc://claim/../../x"]
)
def test_it_refuses_a_malformed_source_of_a_known_scheme(uri):
    field, detail = refusal(rules.source_uri, uri)
    assert field == "source_uri"
    assert "well-formed" in detail


@pytest.mark.parametrize(
    "flag", ["--port", "--host", "--served-model-name", "--model", "--max-model-len", "--api-key"]
)
def test_it_refuses_engine_flags_the_platform_sets_saying_which_and_why(flag):
    field, detail = refusal(rules.engine_args, [f"{flag}=1"], 1)
    assert field == "engine_args"
    assert detail.startswith(f"{flag} is set by the platform")
    assert refusal(rules.engine_args, ["--dtype", "bfloat16", flag, "x"], 1)[1].startswith(flag)


def test_it_refuses_a_tensor_parallel_size_that_does_not_use_every_gpu_of_the_replica():
    field, detail = refusal(rules.engine_args, ["--tensor-parallel-size", "2"], 4)
    assert field == "engine_args"
    assert "tensor parallel size 2 × pipeline parallel size 1 must equal gpus_per_replica (4)" in detail
    assert refusal(rules.engine_args, ["-tp=8"], 4)[0] == "engine_args"


def test_it_accepts_parallelism_that_uses_exactly_the_replicas_gpus():
    assert rules.engine_args(["--tensor-parallel-size=2", "--pipeline-parallel-size", "2"], 4)
    assert rules.engine_args(["-tp", "4", "--enable-prefix-caching"], 4)
    assert rules.engine_args([], 8) == []


@pytest.mark.parametrize("args", ["--dtype=bf16", [1, 2], ["ok", None], [""], ["x" * 501]])
def test_it_refuses_engine_args_that_are_not_a_list_of_short_strings(args):
    assert refusal(rules.engine_args, args, 1)[0] == "engine_args"


def test_it_refuses_min_above_max_and_a_max_of_zero():
    assert refusal(rules.replicas, 3, 2) == (
        "min_replicas",
        "min_replicas (3) must not exceed max_replicas (2)",
    )
    assert refusal(rules.replicas, 0, 0)[0] == "max_replicas"
    rules.replicas(0, 1)  # scale to zero


def test_a_mig_or_shared_replica_takes_one_unit():
    field, detail = refusal(rules.gpus_per_replica, 2, "mig", "h200-141gb.mig-1g.18gb")
    assert field == "gpus_per_replica"
    assert "choose a larger slice or whole GPUs" in detail
    assert rules.gpus_per_replica(8, "whole", "h200-141gb") == 8


def test_only_a_published_endpoint_has_a_price_and_it_must_have_one():
    assert refusal(rules.price, "published", None)[0] == "price_per_million_tokens"
    assert "set visibility to published" in refusal(rules.price, "tenant", Decimal("1"))[1]
    assert refusal(rules.price, "published", Decimal("-1"))[0] == "price_per_million_tokens"
    assert rules.price("published", Decimal("0")) == 0


@pytest.mark.parametrize("name", ["Chat", "1chat", "chat-", "a" * 41, "chat_bot", ""])
def test_it_refuses_names_that_are_not_dns_labels(name):
    field, detail = refusal(rules.name, name)
    assert field == "name"
    assert "DNS label" in detail
