"""The end of a run reads its document into the model once, with a baseline as without one.

The baseline comparison, the verdict, the JSON file, the page and the terminal summary all read
the one validation `run.finish` makes; the baseline file itself is read (and validated) once more,
being another run's document.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.model import load
from pytest_inferaccept.run import finish as finish_module
from pytest_inferaccept.run.finish import FinishedRun

CHAT_PASSES = """
def test_chat(http_client, model):
    r = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200

def test_models(http_client):
    assert http_client.get("/v1/models").status_code == 200
"""
DOCUMENTS = ("RunBody", "RunDocument")


def _counting(monkeypatch: pytest.MonkeyPatch, baseline: dict[str, Any] | None) -> Counter[str]:
    """Count every `model_validate` by the model's name; the baseline file's own reading as 'baseline'."""
    seen: Counter[str] = Counter()
    original = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> Any:
        seen["baseline" if baseline is not None and obj == baseline else cls.__name__] += 1
        return original(cls, obj, *args, **kwargs)

    monkeypatch.setattr(BaseModel, "model_validate", classmethod(counted))
    return seen


def _keeping(monkeypatch: pytest.MonkeyPatch) -> list[FinishedRun]:
    """Keep what `run.finish.finish` returns (the plugin imports it when the session ends)."""
    kept: list[FinishedRun] = []
    real = finish_module.finish

    def keep(*args: Any, **kwargs: Any) -> FinishedRun:
        kept.append(real(*args, **kwargs))
        return kept[-1]

    monkeypatch.setattr(finish_module, "finish", keep)
    return kept


def test_a_run_with_a_baseline_validates_its_own_document_once(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(CHAT_PASSES)
    with FakeServer() as server:
        first = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "base.json")
        assert first.ret == 0, first.stdout.str()
        base = json.loads((pytester.path / "base.json").read_text(encoding="utf-8"))
        kept = _keeping(monkeypatch)
        seen = _counting(monkeypatch, base)
        second = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "new.json",
                                              "--inferaccept-baseline", "base.json")
        monkeypatch.undo()
    assert second.ret == 0, second.stdout.str()
    assert "changed since the baseline" in second.stdout.str()
    documents = {name: seen[name] for name in DOCUMENTS if seen[name]}
    assert sum(documents.values()) == 1, f"this run's document was validated as {documents}"
    assert seen["baseline"] == 1
    (finished,) = kept
    assert finished.run is not None and finished.run.baseline is not None
    # The run made of the one validation says what the written document says, key for key.
    assert finished.run.model_dump(by_alias=True, exclude_unset=True) == \
        load(finished.document).model_dump(by_alias=True, exclude_unset=True)
    new = json.loads((pytester.path / "new.json").read_text(encoding="utf-8"))
    assert new["baseline"]["status"] == "no regression" and new["exit_status"] == 0


def test_a_run_without_a_baseline_validates_its_document_once(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(CHAT_PASSES)
    with FakeServer() as server:
        seen = _counting(monkeypatch, None)
        result = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "r.json")
        monkeypatch.undo()
    assert result.ret == 0, result.stdout.str()
    assert sum(seen[name] for name in DOCUMENTS) == 1


def test_a_document_that_does_not_validate_is_still_written_and_a_baseline_run_is_invalid(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_inferaccept.run import document

    pytester.makepyfile(CHAT_PASSES)
    with FakeServer() as server:
        first = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "base.json")
        assert first.ret == 0, first.stdout.str()
        real = document.build_body

        def broken(session: Any) -> dict[str, Any]:
            # A defect of the plugin: a count that is not a number.
            body = real(session)
            body["deselected"]["count"] = "several"
            return body

        monkeypatch.setattr(document, "build_body", broken)
        second = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "new.json",
                                              "--inferaccept-baseline", "base.json")
        monkeypatch.undo()
    out = second.stdout.str()
    assert "VERDICT: INVALID" in out
    assert "outside the acceptance verdict: the results document does not validate" in out
    new = json.loads((pytester.path / "new.json").read_text(encoding="utf-8"))
    assert new["deselected"]["count"] == "several" and new["verdict"]["status"] == "INVALID"
    assert new["baseline"]["status"] == "not compared" and "run" not in new["baseline"]
    assert new["baseline"]["error"].startswith("the baseline could not be compared: this run's own results "
                                               "do not validate")
    assert new["problems"] == [new["baseline"]["error"]] and new["exit_status"] == second.ret == 6
