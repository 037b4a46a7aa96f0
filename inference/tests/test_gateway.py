"""`gpucloud gateway` over real HTTP, called with the `openai` Python client, in front of vLLM stand-ins
(tests/vllm_standin.py): completions whole and streamed, embeddings, the models list, every refusal in
OpenAI's shape with its HTTP status, rpm/tpm/budgets, upstream failures, the usage rows (tokens exactly the
stand-in's), and a drain that lets a stream in flight finish.

Tenant A (alice) has `chat` (served `llama-chat`) and `embed` (`e5`); tenant B (charlie) has `private`
(`b-private`, its own) and `public` (`b-public`, published at 2 per million tokens)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx2 as httpx
import openai
import pytest
import redis
from django.db import DatabaseError

from core.audit import Actor
from fleet.models import GpuClass
from inference import keys
from inference.gateway import limits, store
from inference.models import InferenceUsage
from inference.services import create_endpoint
from inference.tests.gateway_harness import Harness
from tenants.services import quotas

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT: Any = [{"role": "user", "content": "say three words"}]  # 3 prompt tokens for the stand-in
SOURCE = "hf://org/model"


@pytest.fixture
def harness() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


@pytest.fixture
def world(people: dict[str, Any], harness: Harness, settings: Any) -> dict[str, Any]:
    h200 = GpuClass.objects.get(name="h200-141gb")
    admin = Actor.of(people["admin"])
    for tenant in ("a", "b"):
        quotas.set_quota(actor=admin, tenant=people[tenant], gpu_class=h200, guaranteed=4, burst=0)
    alice, charlie = Actor.of(people["alice"]), Actor.of(people["charlie"])
    made = {
        "chat": (alice, people["a"], "llama-chat", {}),
        "embed": (alice, people["a"], "e5", {}),
        "private": (charlie, people["b"], "b-private", {}),
        "public": (
            charlie,
            people["b"],
            "b-public",
            {"visibility": "published", "price_per_million_tokens": Decimal("2")},
        ),
    }
    upstreams, standins = {}, {}
    for name, (actor, tenant, served, extra) in made.items():
        create_endpoint(
            actor=actor,
            tenant=tenant,
            name=name,
            model_name=served,
            source_uri=SOURCE,
            gpu_class=h200,
            served_model_name=served,
            **extra,
        )
        standins[name], upstreams[f"{tenant.slug}/{name}"] = harness.standin(served)
    settings.GATEWAY_UPSTREAMS = upstreams
    url = harness.start_gateway()
    return {"url": url, "standins": standins, "alice": alice, "people": people}


def key(world: dict[str, Any], **limits_: Any) -> str:
    _, text = keys.create_key(actor=world["alice"], tenant=world["people"]["a"], name="app", **limits_)
    return text


def client(world: dict[str, Any], api_key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{world['url']}/v1", api_key=api_key, max_retries=0)


def chat(world: dict[str, Any], api_key: str, model: str = "llama-chat", **extra: Any) -> Any:
    return client(world, api_key).chat.completions.create(model=model, messages=PROMPT, **extra)


def test_a_chat_completion_reaches_the_endpoint_and_is_metered_exactly(world):
    answer = chat(world, key(world), max_tokens=5)

    assert answer.choices[0].message.content == "w0 w1 w2 w3 w4"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 5)
    row = InferenceUsage.objects.get()
    assert (row.prompt_tokens, row.completion_tokens, row.status) == (3, 5, 200)
    assert (row.route, row.model, row.stream, row.completed) == (
        "chat/completions",
        "llama-chat",
        False,
        True,
    )
    assert row.tenant == world["people"]["a"]
    assert row.endpoint.name == "chat"
    assert row.cost == 0  # its own endpoint: priced by billing later, not here
    assert row.latency_ms >= 0
    assert row.first_byte_ms is not None


def test_a_stream_passes_through_chunk_by_chunk_and_its_usage_is_asked_for_and_metered(world):
    chunks = list(chat(world, key(world), stream=True))

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == " ".join(f"w{i}" for i in range(8))
    assert all(c.choices for c in chunks), "the caller did not ask for usage, so it gets no usage chunk"
    assert world["standins"]["chat"].requests[-1]["stream_options"] == {"include_usage": True}
    assert world["standins"]["chat"].streams_finished == 1
    row = InferenceUsage.objects.get()
    assert (row.prompt_tokens, row.completion_tokens, row.stream, row.completed) == (3, 8, True, True)


def test_a_stream_that_asks_for_usage_gets_it(world):
    chunks = list(chat(world, key(world), stream=True, stream_options={"include_usage": True}, max_tokens=2))

    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 2
    assert InferenceUsage.objects.get().completion_tokens == 2


def test_completions_and_embeddings_are_served_and_metered(world):
    api_key = key(world)
    text = client(world, api_key).completions.create(model="llama-chat", prompt="one two", max_tokens=3)
    vectors = client(world, api_key).embeddings.create(model="e5", input=["a b c", "d"])

    assert text.choices[0].text == "w0 w1 w2"
    assert [len(d.embedding) for d in vectors.data] == [4, 4]
    rows = {r.route: (r.prompt_tokens, r.completion_tokens) for r in InferenceUsage.objects.all()}
    assert rows == {"completions": (2, 3), "embeddings": (4, 0)}


def test_the_models_list_is_the_keys_tenants_endpoints_and_published_ones(world):
    models = client(world, key(world)).models.list()

    assert sorted(m.id for m in models.data) == ["b-public", "e5", "llama-chat"]
    assert {m.id: m.owned_by for m in models.data}["b-public"] == "tenant-b"


def test_a_bad_key_gets_401_in_openais_shape(world):
    with pytest.raises(openai.AuthenticationError) as refused:
        chat(world, "gpk_" + "x" * 40)
    assert refused.value.status_code == 401
    assert refused.value.body == {
        "message": "the API key is unknown",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    with pytest.raises(openai.AuthenticationError, match="not a gpucloud inference key"):
        client(world, "sk-something").models.list()
    assert not InferenceUsage.objects.exists()


def test_a_revoked_key_stops_working_at_the_next_request(world):
    row, text = keys.create_key(actor=world["alice"], tenant=world["people"]["a"], name="app")
    chat(world, text)

    keys.revoke_key(actor=world["alice"], key=row)
    with pytest.raises(openai.AuthenticationError, match="revoked"):
        chat(world, text)


def test_another_tenants_private_endpoint_is_not_found_and_an_unlisted_own_endpoint_is_forbidden(world):
    with pytest.raises(openai.NotFoundError, match="does not exist or is not yours"):
        chat(world, key(world), model="b-private")
    with pytest.raises(openai.NotFoundError):
        chat(world, key(world), model="no-such-model")
    only_chat = key(world, endpoints=["chat"])
    with pytest.raises(openai.PermissionDeniedError, match="may not call 'e5'"):
        client(world, only_chat).embeddings.create(model="e5", input="x")
    assert [m.id for m in client(world, only_chat).models.list().data] == ["b-public", "llama-chat"]


def test_a_published_endpoint_bills_its_caller_at_its_price(world):
    chat(world, key(world), model="b-public")  # 3 + 8 tokens at 2 per million

    row = InferenceUsage.objects.get()
    assert row.endpoint.tenant == world["people"]["b"]
    assert row.tenant == world["people"]["a"]
    assert row.cost == Decimal("0.000022")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # the start of a minute

    def time(self) -> float:
        return self.now


def test_rpm_answers_429_with_retry_after_then_recovers_in_the_next_minute(world, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(limits, "time", clock)
    api_key = key(world, rpm=2)
    chat(world, api_key)
    clock.now += 20
    chat(world, api_key)

    with pytest.raises(openai.RateLimitError, match="2 requests per minute") as refused:
        chat(world, api_key)
    assert refused.value.response.headers["retry-after"] == "40"
    assert refused.value.body["code"] == "rate_limit_exceeded"
    clock.now += 40
    assert chat(world, api_key).usage.completion_tokens == 8
    statuses = sorted(InferenceUsage.objects.values_list("status", flat=True))
    assert statuses == [200, 200, 200, 429]


def test_parallel_requests_never_pass_more_than_rpm(world, monkeypatch):
    monkeypatch.setattr(limits, "time", Clock())
    api_key = key(world, rpm=5)
    statuses: list[int] = []

    def call() -> None:
        answer = httpx.post(
            f"{world['url']}/v1/chat/completions",
            json={"model": "llama-chat", "messages": PROMPT},
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=30,
        )
        statuses.append(answer.status_code)

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 5 + [429] * 15


def test_tpm_refuses_once_a_minutes_tokens_are_spent(world, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(limits, "time", clock)
    api_key = key(world, tpm=10)
    chat(world, api_key)  # 11 tokens: served, it was under the limit when it came

    with pytest.raises(openai.RateLimitError, match="10 tokens per minute") as refused:
        chat(world, api_key)
    assert refused.value.body["type"] == "tokens"
    clock.now += 60
    chat(world, api_key)


def test_a_spent_token_budget_gets_429_insufficient_quota(world):
    api_key = key(world, monthly_tokens=15)
    chat(world, api_key)
    chat(world, api_key)  # 11 < 15 when it came

    with pytest.raises(openai.RateLimitError, match="budget of 15 tokens this month is spent") as refused:
        chat(world, api_key)
    assert refused.value.body["code"] == "insufficient_quota"
    assert int(refused.value.response.headers["retry-after"]) > 0


def test_a_spent_money_budget_gets_429(world):
    api_key = key(world, monthly_budget=Decimal("0.00002"))
    chat(world, api_key, model="b-public")  # costs 0.000022

    for model in ("b-public", "llama-chat"):  # a spent key is spent, whatever it calls
        with pytest.raises(openai.RateLimitError, match=r"budget of 0\.000020 this month is spent"):
            chat(world, api_key, model=model)


def test_an_upstream_failing_or_down_gets_502_or_503_in_openais_shape(world, settings):
    api_key = key(world)
    world["standins"]["chat"].mode = "fail"
    with pytest.raises(openai.InternalServerError, match="engine dead") as failed:
        chat(world, api_key)
    assert failed.value.status_code == 502
    assert failed.value.body["type"] == "server_error"

    world["standins"]["chat"].mode = "drop"
    with pytest.raises(openai.InternalServerError) as dropped:
        chat(world, api_key, stream=True)
    assert dropped.value.status_code == 502

    settings.GATEWAY_UPSTREAMS = {**settings.GATEWAY_UPSTREAMS, "tenant-a/chat": "http://127.0.0.1:9"}
    with pytest.raises(openai.InternalServerError, match="no replica") as down:
        chat(world, api_key)
    assert down.value.status_code == 503
    assert sorted(InferenceUsage.objects.values_list("status", flat=True)) == [502, 502, 503]


def test_a_stream_broken_by_the_upstream_is_metered_as_not_completed(world):
    world["standins"]["chat"].mode = "break"
    with pytest.raises(openai.APIError, match="broke off mid-stream"):
        list(chat(world, key(world), stream=True))

    row = InferenceUsage.objects.get()
    assert (row.status, row.completed) == (502, False)


def test_a_caller_leaving_mid_stream_is_metered_once_as_not_completed(world):
    world["standins"]["chat"].delay = 0.2  # 8 chunks: 1.6 s
    api_key = key(world)
    with httpx.stream(
        "POST",
        f"{world['url']}/v1/chat/completions",
        json={"model": "llama-chat", "messages": PROMPT, "stream": True},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    ) as answer:
        assert answer.status_code == 200
        first = next(answer.iter_lines())
    assert first.startswith("data: ")

    deadline = time.monotonic() + 10
    while not InferenceUsage.objects.exists():
        assert time.monotonic() < deadline, "no usage row for the abandoned stream"
        time.sleep(0.1)
    time.sleep(2)  # the stand-in's stream would have ended by now: still one row
    row = InferenceUsage.objects.get()
    assert (row.status, row.stream, row.completed) == (200, True, False)
    assert world["standins"]["chat"].streams_finished == 0, "the upstream request was not cancelled"


def test_a_drain_stops_readiness_and_lets_a_stream_in_flight_finish(world, harness):
    world["standins"]["chat"].delay = 0.1  # 8 chunks: 0.8 s
    api_key = key(world)
    words: list[str] = []

    def stream() -> None:
        words.extend(chunk.choices[0].delta.content or "" for chunk in chat(world, api_key, stream=True))

    reader = threading.Thread(target=stream)
    reader.start()
    time.sleep(0.3)
    assert harness.gateway is not None
    draining = harness.loop.call_soon_threadsafe  # start the drain on the gateway's loop
    done = threading.Event()

    async def drain() -> None:
        await harness.gateway.drain(0.2)
        done.set()

    draining(lambda: harness.loop.create_task(drain()))
    time.sleep(0.1)
    assert httpx.get(f"{world['url']}/readyz").status_code == 503
    reader.join(10)
    assert "".join(words) == " ".join(f"w{i}" for i in range(8))
    assert done.wait(10)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{world['url']}/healthz")
    assert InferenceUsage.objects.get().completed


def test_a_failure_inside_the_gateway_is_answered_in_openais_shape(world, monkeypatch):
    def broken(text: str, model: str) -> None:
        raise DatabaseError("connection refused")

    monkeypatch.setattr(store, "grant", broken)
    with pytest.raises(openai.InternalServerError, match="cannot reach its database") as refused:
        chat(world, key(world))
    assert refused.value.status_code == 503
    assert refused.value.response.headers["retry-after"] == "1"

    monkeypatch.setattr(store, "grant", lambda text, model: 1 / 0)
    with pytest.raises(openai.InternalServerError) as failed:
        chat(world, key(world))
    assert failed.value.body["code"] == "internal_error"


def test_a_limited_key_is_refused_503_while_redis_is_away_and_an_unlimited_one_served(world, monkeypatch):
    async def away(*args: Any, **kwargs: Any) -> None:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(limits, "_admit", away)
    with pytest.raises(openai.InternalServerError, match="cannot count this key's limits") as refused:
        chat(world, key(world, rpm=10))
    assert refused.value.status_code == 503
    assert chat(world, key(world)).usage.completion_tokens == 8
    assert sorted(InferenceUsage.objects.values_list("status", flat=True)) == [200, 503]


def test_the_probes_answer(world):
    assert httpx.get(f"{world['url']}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{world['url']}/readyz").json() == {"status": "ready"}
    missing = httpx.get(f"{world['url']}/v2/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url"
