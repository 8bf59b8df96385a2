"""The endpoints evaluation harnesses use: each check fails with its fault for the reason the fault
gives, passes on the correct fake, and is skipped, naming what is missing, where the server lacks
the endpoint; the fake's /tokenize counts what its chat path reports."""

from __future__ import annotations

import httpx
import pytest

from pytest_inferaccept.fake.server import FakeServer
from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_eval_endpoints"
ARGS = ["--request-timeout", "5", "-rs"]
ECHO = "test_echo_returns_logprobs_for_the_prompt_tokens"
COUNT = "test_tokenized_chat_prompt_counts_as_usage_prompt_tokens"
BOS = "test_chat_prompt_starts_with_at_most_one_bos_token"

FAULT_TABLE = [
    ("echo_logprobs_generated_only", ECHO,
     "returned 1 logprob entries for a 11-token prompt and 1 generated token(s) (at least 12 expected): "
     "the logprobs cover the generated tokens only"),
    ("double_bos", BOS, "the chat prompt starts with 2 BOS tokens (id 1)"),
    ("tokenize_without_bos", COUNT, "usage.prompt_tokens says 18 (+1)"),
]
"""(fault, the check it must fail, what the failure must say)."""
SELECT = one_run_per_fault((fault, check) for fault, check, _ in FAULT_TABLE)

MISSING = [
    ("no_tokenize", COUNT, "unsupported: tokenize: POST /tokenize gave no tokens: llama.cpp shape: HTTP 404"),
    ("no_tokenize", BOS, "unsupported: tokenize: POST /tokenize gave no tokens: llama.cpp shape: HTTP 404"),
    ("echo_rejected", ECHO, "unsupported: echo_logprobs: HTTP 400: "),
    ("no_completions", ECHO, "unsupported: echo_logprobs: HTTP 404"),
]
"""(fault that takes an endpoint away, the check it skips, what the skip reason says)."""


def test_every_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, args=ARGS)
    assert clean.outcomes == {ECHO: "passed", COUNT: "passed", BOS: "passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("fault", "check", "says"), FAULT_TABLE)
def test_check_fails_with_its_fault_for_its_reason(run_suite: RunSuite, fault: str, check: str,
                                                   says: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], args=ARGS)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    assert says in faulty.failure(check), faulty.failure(check)


def test_a_doubled_bos_leaves_the_counts_agreeing_and_fails_only_the_bos_check(run_suite: RunSuite) -> None:
    faulty = run_suite(SUITE, faults=["double_bos"], args=ARGS)
    assert faulty.outcome(COUNT) == "passed", faulty.failure(COUNT)
    failure = faulty.failure(BOS)
    # Both routes to the chat prompt's ids show it, and the message says how the BOS id was found.
    assert "POST /tokenize with the chat messages (vLLM): first ids [1, 1," in failure, failure
    assert "POST /apply-template, then /tokenize with add_special (llama.cpp): first ids [1, 1," in failure
    assert "the tokenizer puts id 1 in front of 'Hello world' with special tokens on" in failure


@pytest.mark.parametrize(("fault", "check", "says"), MISSING)
def test_a_server_without_the_endpoint_skips_naming_what_it_lacks(run_suite: RunSuite, fault: str,
                                                                  check: str, says: str) -> None:
    run = run_suite(SUITE, faults=[fault], args=ARGS)
    assert run.outcome(check) == "skipped", run.output[-3000:]
    assert says in run.output, run.output[-3000:]


def test_a_required_echo_that_the_server_rejects_fails_with_the_answer(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, faults=["echo_rejected"], args=[*ARGS, "--capabilities", "chat,echo_logprobs"])
    assert run.outcome(ECHO) == "failed", run.output[-3000:]
    assert "completion with echo and logprobs answered 400" in run.failure(ECHO), run.failure(ECHO)


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name two  primes,\nplease."}],
    [{"role": "user", "content": [{"type": "text", "text": "a b"}]}, {"role": "assistant", "content": "c"},
     {"role": "user", "content": ""}],
])
def test_the_fakes_tokenize_counts_what_its_chat_path_reports(messages: list[dict[str, object]]) -> None:
    with FakeServer() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        chat = client.post("/v1/chat/completions", json={"model": server.config.model, "messages": messages,
                                                          "max_tokens": 1, "temperature": 0}).json()
        vllm = client.post("/tokenize", json={"model": server.config.model, "messages": messages}).json()
        prompt = client.post("/apply-template", json={"messages": messages}).json()["prompt"]
        llama = client.post("/tokenize", json={"content": prompt, "add_special": True}).json()
    assert vllm["count"] == len(vllm["tokens"]) == len(llama["tokens"]) == chat["usage"]["prompt_tokens"]
    assert vllm["tokens"] == llama["tokens"] and vllm["tokens"][:2].count(1) == 1


def test_the_fakes_echo_logprobs_spell_the_echoed_text_with_offsets() -> None:
    prompt = "one  two\tthree "
    with FakeServer() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        body = {"model": server.config.model, "prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 2,
                "temperature": 0}
        data = client.post("/v1/completions", json=body).json()
    choice, usage = data["choices"][0], data["usage"]
    logprobs = choice["logprobs"]
    assert choice["text"].startswith(prompt) and "".join(logprobs["tokens"]) == choice["text"]
    assert len(logprobs["tokens"]) == usage["prompt_tokens"] + usage["completion_tokens"] == 3 + 2
    assert logprobs["token_logprobs"][0] is None and all(v < 0 for v in logprobs["token_logprobs"][1:])
    assert logprobs["text_offset"] == [len("".join(logprobs["tokens"][:i])) for i in range(5)]


@pytest.mark.parametrize(("ids", "bos", "repeats"), [
    ([1, 1, 9690, 198], 1, 2),
    ([1, 9690, 198], 1, 1),
    ([9690, 198], 1, 0),
    ([7, 7, 9690], None, 2),
    ([1, 9690, 1], None, 1),
])
def test_leading_repeats_counts_the_bos_or_with_it_unknown_the_first_id(ids: list[int], bos: int | None,
                                                                       repeats: int) -> None:
    from pytest_inferaccept.suites.test_eval_endpoints import leading_repeats

    assert leading_repeats(ids, bos) == repeats
