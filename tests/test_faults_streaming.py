"""Each streaming check fails with its fault and passes without."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pytest_inferaccept.fake import FakeServer
from tests.conftest import RunSuite, one_run_per_fault

CAPS = ["--capabilities", "chat,stream,stream_usage,n", "--request-timeout", "5"]
CHAT = "/v1/chat/completions"

FAULT_TABLE = [
    ("stream_no_done", "test_stream_is_well_formed_sse_ending_with_done", "[DONE]"),
    ("stream_content_type_wrong", "test_stream_is_well_formed_sse_ending_with_done", "content-type"),
    ("stream_inconsistent_id", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "different ids"),
    ("stream_no_role", "test_stream_chunks_share_one_id_with_one_role_and_one_finish", "role"),
    ("stream_double_finish", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "expected exactly one"),
    ("finish_reason_invalid", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "eos_token"),
    ("stream_error_chunk", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "the engine failed while generating"),
    ("stream_text_differs", "test_streamed_text_equals_the_non_streamed_text", "differs"),
    ("stream_error_chunk", "test_streamed_text_equals_the_non_streamed_text",
     "the engine failed while generating"),
    ("usage_every_chunk", "test_usage_arrives_once_at_the_end_when_asked", "vLLM #7262"),
    ("usage_chunk_with_choices", "test_usage_arrives_once_at_the_end_when_asked", "LiteLLM #28735"),
    ("usage_without_asking", "test_no_usage_is_streamed_unless_asked", "llama.cpp #16048"),
    ("n_wrong_indices", "test_n_choices_stream_with_indices_from_zero", "indices"),
    ("ignore_n", "test_n_choices_stream_with_indices_from_zero", "indices"),
    ("stream_text_differs", "test_openai_sdk_streams_the_same_text", "differs"),
    ("stream_error_chunk", "test_openai_sdk_streams_the_same_text", "the engine failed while generating"),
    ("empty_under_concurrency", "test_concurrent_streams_each_get_a_complete_answer",
     "answers were empty (role chunk and [DONE]; no content, no finish_reason)"),
]
"""(fault, check that must fail with it, text the failure message must contain)."""
SELECT = one_run_per_fault((fault, check) for fault, check, _ in FAULT_TABLE)
"""The checks of one fault run together; each row reads its own check's outcome and message."""


def test_every_streaming_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite) -> None:
    clean = run_suite("test_streaming", args=CAPS)
    assert clean.outcomes and set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("fault", "check", "evidence"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str, evidence: str) -> None:
    faulty = run_suite("test_streaming", faults=[fault], select=SELECT[fault], args=CAPS)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    assert evidence in faulty.failure(check), faulty.output[-3000:]


def test_empty_under_concurrency_spoils_only_requests_that_share_the_server() -> None:
    body = {"model": "fake-chat", "temperature": 0, "max_tokens": 8,
            "messages": [{"role": "user", "content": "Write one sentence about rivers."}]}
    streamed = {**body, "stream": True}
    with FakeServer(faults=["empty_under_concurrency"]) as server:
        async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
            async with httpx.AsyncClient(base_url=server.url, timeout=15) as client:
                alone = [await client.post(CHAT, json=b) for b in (streamed, body)]
                together = await asyncio.gather(*(client.post(CHAT, json=b)
                                                  for b in (streamed, streamed, body, body)))
                return alone, list(together)

        alone, together = asyncio.run(scenario())
    assert [r.status_code for r in alone + together] == [200] * 6
    lone_stream = [line for line in alone[0].text.splitlines() if line.startswith("data: ")]
    assert '"content": "' in "".join(lone_stream[1:]) and '"finish_reason": "' in alone[0].text
    assert alone[1].json()["choices"][0]["message"]["content"]
    for resp in together[:2]:
        events = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
        assert len(events) == 2 and events[1] == "[DONE]", resp.text
        assert json.loads(events[0])["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    for resp in together[2:]:
        choice = resp.json()["choices"][0]
        assert (choice["message"]["content"], choice["finish_reason"]) == ("", None)
