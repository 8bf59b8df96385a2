"""Each reasoning-model check fails against the fake server with its fault, and passes without.

The fake reasons only when asked (`reasoning_tokens`): these runs give it 24 reasoning tokens
before each answer, more than the 16 that test_reasoning_that_uses_up_max_tokens_reports_length
allows, fewer than the 256 the other checks allow.
"""

from __future__ import annotations

import httpx
import pytest

from pytest_inferaccept.fake import FakeConfig, FakeServer
from pytest_inferaccept.settings import SettingsError, resolve
from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_reasoning"
REASONING: dict[str, object] = {"reasoning_tokens": 24}
CAPS = ["--capabilities", "chat,stream,reasoning", "--request-timeout", "5"]
BOTH = ("non-stream", "stream")
OFF = "test_reasoning_off_switch_gives_an_answer_without_reasoning"

FAULT_TABLE = [
    *[(fault, f"test_no_reasoning_or_markers_leak_into_the_answer[{mode}]", text) for mode in BOTH
      for fault, text in (("think_in_content", "content repeats the reasoning text"),
                          ("think_in_content", "content holds <think>, </think>"),
                          ("harmony_in_content", "content holds <|channel|>, <|message|>"))],
    *[("stop_inside_reasoning", f"test_stop_applies_to_the_answer_not_the_reasoning[{mode}]",
       "vLLM #14170") for mode in BOTH],
    *[("reasoning_length_hidden", f"test_reasoning_that_uses_up_max_tokens_reports_length[{mode}]",
       "LiteLLM #21041") for mode in BOTH],
    ("reasoning_kwargs_off_ignored", f"{OFF}[enable_thinking_false]",
     "enable_thinking_false: the request sent {'chat_template_kwargs': {'enable_thinking': False}} and the "
     "answer still carries"),
    ("reasoning_effort_none_ignored", f"{OFF}[reasoning_effort_none]",
     "reasoning_effort_none: the request sent {'reasoning_effort': 'none'} and the answer still carries"),
]
"""(fault, check that must fail with it, text its failure must contain)."""
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check, _ in FAULT_TABLE)

FIELD_TABLE = [
    ("reasoning_content", "reasoning", "sends its reasoning only as reasoning_content; the client reads "
                                       "'reasoning'"),
    ("reasoning", "reasoning_content", "sends its reasoning only as reasoning; the client reads "
                                       "'reasoning_content'"),
]
"""(the field the fake sends, the field the client reads (--reasoning-field), the finding)."""
FIELD_CHECK = "test_reasoning_arrives_under_a_field_the_client_reads"


def test_every_check_passes_on_a_correct_reasoning_fake_without_warnings(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, args=CAPS, **REASONING)
    assert clean.outcomes and set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]
    for _, check, _ in FAULT_TABLE:
        assert clean.outcome(check) == "passed"


def test_only_the_leak_check_runs_on_a_server_without_reasoning(run_suite: RunSuite) -> None:
    plain = run_suite(SUITE, args=["--request-timeout", "5"])
    for mode in BOTH:
        assert plain.outcome(f"test_no_reasoning_or_markers_leak_into_the_answer[{mode}]") == "passed"
        assert plain.outcome(f"{FIELD_CHECK}[{mode}]") == "skipped", plain.output[-3000:]
        assert plain.outcome(f"test_stop_applies_to_the_answer_not_the_reasoning[{mode}]") == "skipped"
    for switch in ("enable_thinking_false", "reasoning_effort_none"):
        assert plain.outcome(f"{OFF}[{switch}]") == "skipped", plain.output[-3000:]
    assert "a plain answer carries no reasoning text" in plain.output, plain.output[-3000:]


@pytest.mark.parametrize(("fault", "check", "text"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str, text: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], args=CAPS, **REASONING)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    assert text in faulty.failure(check), faulty.failure(check)


@pytest.mark.parametrize(("sent", "client_reads", "text"), FIELD_TABLE)
def test_a_reasoning_field_the_client_does_not_read_is_a_finding(run_suite: RunSuite, sent: str,
                                                                 client_reads: str, text: str) -> None:
    run = run_suite(SUITE, select=FIELD_CHECK, args=[*CAPS, "--reasoning-field", client_reads],
                    reasoning_field=sent, **REASONING)
    for mode in BOTH:
        check = f"{FIELD_CHECK}[{mode}]"
        assert run.outcome(check) == "failed", run.output[-3000:]
        assert text in run.failure(check) and "vLLM renamed" in run.failure(check), run.failure(check)


def test_reasoning_field_option_and_fake_knob_refuse_unknown_names() -> None:
    with pytest.raises(SettingsError, match="allowed: any, reasoning, reasoning_content"):
        resolve(lambda key: "thinking" if key == "reasoning_field" else None, {})
    assert resolve(lambda key: None, {}).reasoning_field == "any"
    with pytest.raises(ValueError, match="reasoning_field must be one of reasoning_content, reasoning, both"):
        FakeConfig(reasoning_field="thinking")


def test_the_fake_sends_both_names_while_renaming() -> None:
    body = {"model": "fake-chat", "temperature": 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": "Say hello."}]}
    with FakeServer(reasoning_tokens=4, reasoning_field="both") as server:
        message = httpx.post(f"{server.url}/v1/chat/completions", json=body).json()["choices"][0]["message"]
        stream = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "stream": True}).text
    assert message["reasoning"] and message["reasoning"] == message["reasoning_content"]
    assert stream.count('"reasoning":') == stream.count('"reasoning_content":') == 4
