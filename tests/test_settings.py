"""Settings resolve once from options; bad values are rejected with what is allowed."""

from __future__ import annotations

import pytest

from pytest_inferaccept.settings import SettingsError, normalize_base_url, resolve


def _resolve(**values: str) -> object:
    return resolve(lambda key: values.get(key), environ={})


@pytest.mark.parametrize(("raw", "root"), [
    ("http://gpu-box:8000", "http://gpu-box:8000"),
    ("http://gpu-box:8000/", "http://gpu-box:8000"),
    ("http://gpu-box:8000/v1", "http://gpu-box:8000"),
    ("http://gpu-box:8000/v1/", "http://gpu-box:8000"),
    ("https://gw.example/api/v1", "https://gw.example/api"),
])
def test_server_url_is_normalised_with_or_without_v1(raw: str, root: str) -> None:
    assert normalize_base_url(raw) == root


@pytest.mark.parametrize("raw", ["gpu-box:8000", "ftp://x", "http://", "http://h:notaport"])
def test_a_server_url_that_is_not_a_url_is_rejected(raw: str) -> None:
    with pytest.raises(SettingsError, match="server-url"):
        normalize_base_url(raw)


def test_unknown_capability_is_rejected_naming_the_allowed_ones() -> None:
    with pytest.raises(SettingsError, match=r"unknown capability telepathy; allowed: chat, stream"):
        _resolve(server_url="http://h:1", capabilities="chat,telepathy")


def test_capabilities_default_to_chat_and_remember_they_were_not_given() -> None:
    s = resolve(lambda k: {"server_url": "http://h:1"}.get(k), environ={})
    assert s.capabilities == ("chat",)
    assert not s.capabilities_given


def test_unknown_preset_is_rejected_naming_the_presets() -> None:
    with pytest.raises(SettingsError, match="allowed: fake, llama-cpp, llama-cpp-reasoning, vllm-cpu"):
        _resolve(server_preset="tgi")


def test_server_cmd_needs_a_port_placeholder_or_a_url() -> None:
    with pytest.raises(SettingsError, match=r"\{port\}"):
        _resolve(server_cmd="my-server --port 8000")
    assert _resolve(server_cmd="my-server --port {port}")
    assert _resolve(server_cmd="my-server --port 8000", server_url="http://127.0.0.1:8000")


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan", "inf"])
def test_timeouts_must_be_positive_numbers(raw: str) -> None:
    with pytest.raises(SettingsError, match="request-timeout"):
        _resolve(server_url="http://h:1", request_timeout=raw)


def test_api_key_comes_from_the_environment_and_is_never_in_repr_or_description() -> None:
    s = resolve(lambda k: {"server_url": "http://h:1"}.get(k),
                environ={"INFERACCEPT_API_KEY": "sk-secret-123"})
    assert s.api_key == "sk-secret-123"
    assert "sk-secret-123" not in repr(s)
    assert "sk-secret-123" not in str(s.describe())


def test_auth_capability_needs_a_key() -> None:
    with pytest.raises(SettingsError, match="api-key"):
        _resolve(server_url="http://h:1", capabilities="chat,auth")
