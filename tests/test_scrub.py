"""The scrubber removes keys, URL passwords and secret-shaped values before anything is cut."""

from __future__ import annotations

import pytest

from pytest_inferaccept.evidence import BODY_EXCERPT, Evidence, Exchange
from pytest_inferaccept.scrub import MASK, Scrubber, secret_key_name, strip_userinfo

KEY = "sk-live-0123456789abcdefXYZ"


def test_a_known_key_and_a_long_prefix_of_it_are_scrubbed() -> None:
    s = Scrubber([KEY])
    assert s.text(f"got {KEY}") == "got ***"
    assert s.text(f"Incorrect API key provided: {KEY[:12]}...") == "Incorrect API key provided: ***..."
    assert s.text("the word sk-live appears") == "the word sk-live appears"  # shorter than a prefix


@pytest.mark.parametrize(("text", "clean"), [
    ("Authorization: Bearer abc.def-123", "Authorization: Bearer ***"),
    ("http://user:pa55word@gpu-box:8000/v1", "http://user:***@gpu-box:8000/v1"),
    ("vllm serve m --api-key s3cr3t --port 8000", "vllm serve m --api-key *** --port 8000"),
    ("llama-server --api-key=s3cr3t", "llama-server --api-key=***"),
    ("HF_TOKEN=hf_abcdef python serve.py", "HF_TOKEN=*** python serve.py"),
    ("max_tokens=16 and --max-tokens 16", "max_tokens=16 and --max-tokens 16"),
])
def test_secret_shapes_are_scrubbed_without_a_known_key(text: str, clean: str) -> None:
    assert Scrubber().text(text) == clean


@pytest.mark.parametrize("name", ["api_key", "api_keys", "apiKey", "openaiApiKey", "secret_key",
                                  "hf_token", "access_token", "Authorization", "password", "token"])
def test_usual_spellings_of_secret_key_names_are_secrets(name: str) -> None:
    assert secret_key_name(name)


@pytest.mark.parametrize("name", ["prompt_tokens", "max_tokens", "tokenizer", "model", "key_count"])
def test_ordinary_names_are_not_secrets(name: str) -> None:
    assert not secret_key_name(name)


def test_json_data_is_scrubbed_by_key_name_and_by_value() -> None:
    data = {"settings": {"openaiApiKey": "x", "server_cmd": f"serve --api-key {KEY}"},
            "usage": {"prompt_tokens": 3}, "list": [f"Bearer {KEY}"]}
    assert Scrubber([KEY]).data(data) == {
        "settings": {"openaiApiKey": "***", "server_cmd": "serve --api-key ***"},
        "usage": {"prompt_tokens": 3}, "list": ["Bearer ***"]}


def test_a_key_across_the_excerpt_cut_does_not_survive_as_a_prefix() -> None:
    evidence = Evidence(secrets=(KEY,))
    body = "x" * (BODY_EXCERPT - 5) + KEY + "y" * 100
    evidence.add_exchange(Exchange(method="POST", url="http://h/v1", response_body=body))
    kept = evidence.exchanges[0].response_body
    assert KEY[:5] not in kept
    assert kept.startswith("x" * 100)


def test_credentials_are_stripped_from_a_url_for_display() -> None:
    assert strip_userinfo("http://u:p@h:1/v1") == "http://h:1/v1"
    assert strip_userinfo("http://h:1") == "http://h:1"


def test_a_flag_or_a_figure_under_a_secret_looking_name_is_kept_and_a_string_is_masked() -> None:
    scrubber = Scrubber(["sk-live-1234567890"])
    data = {"api_key_set": True, "hf_token": "hf_abcdef", "auth_token": 12345,
            "ttft_any_token": {"p95": 0.25, "n": 40, "access_token": "leaked"},
            "note": "key sk-live-1234567890 seen"}
    out = scrubber.data(data)
    assert out["api_key_set"] is True  # says whether a key was given, not the key
    assert out["hf_token"] == MASK and out["auth_token"] == MASK
    assert out["ttft_any_token"] == {"p95": 0.25, "n": 40, "access_token": MASK}  # a latency summary
    assert "sk-live" not in out["note"]
