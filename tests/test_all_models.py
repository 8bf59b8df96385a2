"""--all-models: the core checks run once for each listed model; the matrix gets a column per model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.fake.__main__ import main as fake_main
from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.plugin import _chat_models
from pytest_inferaccept.plugin.options import settings_from_config
from pytest_inferaccept.settings import resolve
from tests.conftest import RunSuite

MODULES = ["test_service", "test_chat", "test_streaming"]
# The third name has characters the HTML page must escape and a slash, as a gateway's names do.
MODELS = ("alpha", "beta", "org/gamma<2>")
GATEWAY: dict[str, Any] = {"model": "alpha", "served_models": MODELS, "unservable_model": "beta"}
"""The fake as a gateway that lists three chat models and has no backend for beta."""
CORE = ("test_models_endpoint_lists_the_model_under_test", "test_responses_name_a_listed_model",
        "test_chat_completion_has_the_openai_shape", "test_stream_is_well_formed_sse_ending_with_done")


def test_every_listed_model_is_checked_and_the_unservable_one_is_a_no_go(run_suite: RunSuite,
                                                                           tmp_path: Path) -> None:
    results, page = tmp_path / "results.json", tmp_path / "report.html"
    run = run_suite(MODULES, args=["--all-models", "-m", "inferaccept_core", "--inferaccept-json",
                                   str(results), "--inferaccept-html", str(page)], **GATEWAY)
    # Each core check ran once per listed chat model; the embedding model (given) is left out.
    assert sorted(run.outcomes) == sorted(f"{name}[{model}]" for name in CORE for model in MODELS)
    assert not any("fake-embed" in name for name in run.outcomes)
    bad = sorted(name for name, outcome in run.outcomes.items() if outcome != "passed")
    assert bad == sorted(f"{name}[beta]" for name in CORE[1:]), run.output[-3000:]
    assert "404" in run.failure("test_chat_completion_has_the_openai_shape[beta]")
    assert run.ret == 1
    assert "VERDICT: NO-GO" in run.output
    # the terminal groups failed checks into findings as the page does, each naming its check
    assert "- test_chat_completion_has_the_openai_shape[beta]: chat completion answered 404" in run.output
    # The summary: a column per model under the capability matrix.
    lines = run.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("per model (--all-models"))
    assert lines[head + 1].split() == ["model", *MODELS]
    assert lines[head + 2].split() == ["core", "checks", "4", "passed", "3", "failed,", "1", "passed",
                                       "4", "passed"]
    assert next(line for line in lines[head:] if line.split()[:1] == ["stream"]).split() == [
        "stream", "supported", "broken", "supported"]

    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["verdict"]["status"] == "NO-GO"
    assert document["capabilities"]["stream"]["models"] == {
        "alpha": "supported", "beta": "broken", "org/gamma<2>": "supported"}
    assert document["capabilities"]["stream"]["status"] == "broken"
    ran_against = {t["nodeid"].rsplit("::", 1)[-1]: t["model"] for t in document["tests"]}
    assert ran_against["test_chat_completion_has_the_openai_shape[org/gamma<2>]"] == "org/gamma<2>"
    assert set(ran_against.values()) == set(MODELS)

    html = page.read_text(encoding="utf-8")
    table = html[html.index('<section id="capabilities">'):]
    table = table[:table.index("</section>")]
    assert re.findall(r'<th class="model">(.*?)</th>', table) == ["alpha", "beta", "org/gamma&lt;2&gt;"]
    assert "org/gamma<2>" not in table  # escaped as every other value
    assert "3 failed, 1 passed" in table and '<span class="pill broken">broken</span>' in table


def test_without_all_models_only_the_model_under_test_is_checked_with_the_same_ids(
        run_suite: RunSuite) -> None:
    run = run_suite(MODULES, args=["-m", "inferaccept_core"], **GATEWAY)
    assert sorted(run.outcomes) == sorted(CORE)  # no [model] in the ids: expectations files keep matching
    assert set(run.outcomes.values()) == {"passed"}
    assert run.ret == 0
    assert "VERDICT: GO" in run.output
    assert "per model" not in run.output


def test_an_unreachable_server_with_all_models_is_invalid_not_a_collection_error(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.inferaccept_core
        def test_core(model):
            pass
    """)
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9", "--all-models")
    assert result.ret == 6
    out = result.stdout.str()
    assert "VERDICT: INVALID" in out and "connection refused" in out
    assert "error" not in result.parseoutcomes()


def test_the_fake_lists_every_served_model_and_refuses_the_unservable_one() -> None:
    with FakeServer(**GATEWAY) as server, httpx.Client(base_url=server.url) as client:
        listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
        assert listed == [*MODELS, "fake-embed"]
        for model in MODELS:
            resp = client.post("/v1/chat/completions", json={
                "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
            if model == "beta":
                assert resp.status_code == 404
                assert resp.json()["error"]["code"] == "model_not_found"
            else:
                assert resp.status_code == 200, resp.text


def test_the_fake_defaults_are_unchanged_and_a_bad_gateway_setup_is_refused() -> None:
    assert FakeConfig().chat_models == ("fake-chat",) == FakeConfig().answered_models
    with pytest.raises(ValueError, match="'zeta' is not a listed chat model"):
        FakeConfig(served_models=("a", "b"), unservable_model="zeta")
    with pytest.raises(SystemExit):  # --model must be the first of --served-models
        fake_main(["--served-models", "a,b", "--model", "b"])


def test_the_models_checked_leave_out_the_embedding_model_and_keep_the_model_under_test() -> None:
    assert _chat_models(["a", "emb", "b", "a"], "a", "emb") == ["a", "b"]
    assert _chat_models(["a", "b"], "given", None) == ["a", "b", "given"]  # --model not listed
    assert _chat_models([], "given", None) == ["given"]  # no /v1/models: the model given


def test_the_option_and_its_ini_twin_set_all_models(pytester: pytest.Pytester) -> None:
    assert resolve(lambda key: None).all_models is False
    assert settings_from_config(pytester.parseconfigure()).all_models is False
    assert settings_from_config(pytester.parseconfigure("--all-models")).all_models is True
    pytester.makeini("[pytest]\ninferaccept_all_models = true\n")
    assert settings_from_config(pytester.parseconfigure()).all_models is True
