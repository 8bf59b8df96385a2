"""Replay, one by one, every finding the suites report against llama-server, and show its answers.

The findings are read from the expectations file the CI run is held to
(tests/expectations/llama-cpp.json): every check whose outcome is "failed", and every capability
probe a check was skipped on as "broken" (tool_choice_required, tool_choice_named). For each one
the script sends the requests the check itself sends, and judges the answers with the check itself:

- a suite check is called as a plain function (the bundled suite modules are imported, and each
  test function is given the clients, model names and evidence the plugin's fixtures would give
  it), so a replay is judged by exactly the code that judged the suite run;
- a robustness case is built from the catalogue and judged by the status policy (standard), as
  the robustness suite does; the fuzz finding is replayed with its shrunk counterexample (CI's
  seed 0) and judged as the fuzz suite judges a generated request;
- a capability probe is run as the plugin runs it (pytest_inferaccept.probes).

Every request on the wire is recorded below the clients (an httpx transport), so what is printed
is what was sent: the equivalent curl command, the HTTP status and the head of the answer. A
finding is "reproduced" when the check fails (or the probe says broken) on this server now; "no"
when it passes, and "not judged" when it skips or cannot be replayed. The end is a table; the exit
status is 0 only when every finding reproduced.

Without --server-url the script starts the llama-cpp preset itself (the chat server and the
embedding server, with the preset's own flags, on free loopback ports; the preset must have been
prepared: `python -m pytest_inferaccept.servers install llama-cpp`) and stops both by their
process groups when it ends.

Run:  python bench/replay_llama_cpp_findings.py [--threads 1]
      python bench/replay_llama_cpp_findings.py --server-url http://127.0.0.1:18999 \\
          --embedding-url http://127.0.0.1:18998 [--only messages] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks._base import CheckFailed
from pytest_inferaccept.checks.messages import headers as anthropic_headers
from pytest_inferaccept.checks.pace import Pace
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.http import sdk_httpx
from pytest_inferaccept.probes import probe_tool_choice_named, probe_tool_choice_required, probe_tools
from pytest_inferaccept.robustness.cases import CASES_BY_ID, CHAT_PATH, JSON_TYPE, Params, RequestSpec, build
from pytest_inferaccept.robustness.curl import render_curl
from pytest_inferaccept.robustness.policy import classify
from pytest_inferaccept.robustness.send import send
from pytest_inferaccept.robustness.strategies import FUZZ_CASE
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.suites import test_chat, test_embeddings, test_messages, test_responses

ROOT = Path(__file__).resolve().parents[1]
EXPECTATIONS = ROOT / "tests" / "expectations" / "llama-cpp.json"
PRESET = "llama-cpp"
ANSWER_SHOWN = 360
"""Characters of an answer printed per request."""
FUZZ_COUNTEREXAMPLE: dict[str, Any] = {"messages": [{"role": "user", "content": "0"}], "max_tokens": 1,
                                       "tools": False}
"""The fuzz suite's shrunk counterexample under CI's seed 0 (docs/servers/llama-cpp.md): a non-array tools."""


# --- every request on the wire, recorded below the clients -------------------------------------------

@dataclass
class Exchange:
    """One request as sent and the head of its answer as received."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    content_type: str = ""
    answer: bytearray = field(default_factory=bytearray)
    answer_bytes: int = 0
    error: str | None = None


def recording_transport(hx: ModuleType, exchanges: list[Exchange], keep: int = 64 * 1024) -> Any:
    """A transport of the httpx module `hx` (httpx, or the httpx2 the openai SDK 3 is built on) that
    records every exchange it carries: the request whole, the first `keep` bytes of the answer."""

    class Tee(hx.SyncByteStream):  # type: ignore[misc,name-defined]
        """A response body passed on to the client unchanged, its head kept in the exchange."""

        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self.inner, self.exchange = inner, exchange

        def __iter__(self) -> Iterator[bytes]:
            """Each chunk as it comes, counted and kept up to `keep` bytes."""
            for chunk in self.inner:
                self.exchange.answer_bytes += len(chunk)
                room = keep - len(self.exchange.answer)
                if room > 0:
                    self.exchange.answer.extend(chunk[:room])
                yield chunk

        def close(self) -> None:
            """Close the body underneath."""
            self.inner.close()

    class Recorder(hx.BaseTransport):  # type: ignore[misc,name-defined]
        """Sends each request on a new connection and keeps what went and what came back."""

        def __init__(self) -> None:
            # A new connection per request, as the plugin's clients open them: llama-server closes a
            # keep-alive connection after a stream, and a reused stale one fails before any answer.
            self.inner = hx.HTTPTransport(limits=hx.Limits(max_keepalive_connections=0))

        def handle_request(self, request: Any) -> Any:
            """Send the request; keep what was sent and what comes back."""
            exchange = Exchange(request.method, str(request.url), dict(request.headers), request.read())
            exchanges.append(exchange)
            try:
                response = self.inner.handle_request(request)
            except hx.HTTPError as exc:
                exchange.error = f"{type(exc).__name__}: {exc}"
                raise
            exchange.status = response.status_code
            exchange.content_type = response.headers.get("content-type", "")
            return hx.Response(response.status_code, headers=response.headers,
                               stream=Tee(response.stream, exchange), extensions=response.extensions,
                               request=request)

        def close(self) -> None:
            """Close the transport underneath."""
            self.inner.close()

    return Recorder()


# --- what a replay found -------------------------------------------------------------------------------

@dataclass
class Result:
    """One finding replayed: the verdict of its check, and every exchange it took."""

    finding: str
    reproduced: bool | None
    """True: the check fails (probe broken) now; False: it passes; None: not judged."""
    said: str
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def word(self) -> str:
        """The table's word for the verdict."""
        return {True: "yes", False: "no", None: "not judged"}[self.reproduced]


@dataclass
class Context:
    """The clients and names a replay needs (what the plugin's fixtures give a check)."""

    chat: httpx.Client
    embeddings: httpx.Client
    exchanges: list[Exchange]
    base_url: str
    embedding_url: str
    model: str
    embedding_model: str
    timeout: float

    @property
    def server(self) -> ServerUnderTest:
        """The server as the probes see it."""
        return ServerUnderTest(base_url=self.base_url, model=self.model, embedding_url=self.embedding_url,
                               embedding_model=self.embedding_model, served_models=(self.model,), required=())

    @property
    def pace(self) -> Pace:
        """Stream limits as the suites size them from --request-timeout."""
        return Pace(base_s=self.timeout, stall_s=self.timeout, ceiling_s=4 * self.timeout)


Verdict = tuple[bool | None, str]
Replay = Callable[[Context], Verdict]


def judged(call: Callable[[], object]) -> Verdict:
    """Run one check as a plain function: a failure of the check is the finding reproduced."""
    try:
        call()
    except CheckFailed as exc:
        return True, exc.title
    except AssertionError as exc:
        return True, str(exc).splitlines()[0] if str(exc) else "assertion failed"
    except pytest.skip.Exception as exc:
        return None, f"the check skipped: {exc.msg}"
    except Exception as exc:  # a replay that cannot finish says why; it never counts as reproduced
        return None, f"the replay raised {type(exc).__name__}: {excerpt(str(exc), 300)}"
    return False, "the check passed"


def suite_check(check: str, param: str | None, ctx: Context) -> Verdict | None:
    """Call the suite test function behind a check id, with what its fixtures would give it."""
    ev = Evidence()
    stream = param == "stream"
    sent = anthropic_headers(None)
    calls: dict[str, Callable[[], object]] = {
        "test_chat.py::test_unknown_model_is_refused_with_404":
            lambda: test_chat.test_unknown_model_is_refused_with_404(ctx.chat, ctx.model, ev),
        "test_embeddings.py::test_dimensions_is_honoured_or_refused":
            lambda: test_embeddings.test_dimensions_is_honoured_or_refused(
                ctx.embeddings, ctx.embedding_model, ev),
        "test_messages.py::test_errors_come_in_the_anthropic_error_envelope":
            lambda: test_messages.test_errors_come_in_the_anthropic_error_envelope(
                ctx.chat, ctx.model, sent, ev),
        "test_messages.py::test_invalid_request_is_refused_in_the_anthropic_error_envelope":
            lambda: test_messages.test_invalid_request_is_refused_in_the_anthropic_error_envelope(
                ctx.chat, ctx.model, sent, str(param), ev),
        "test_messages.py::test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence":
            lambda: test_messages.test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence(
                ctx.chat, ctx.model, sent, stream, ev, ctx.pace),
        "test_responses.py::test_a_forced_function_call_has_a_call_id_and_json_arguments":
            lambda: test_responses.test_a_forced_function_call_has_a_call_id_and_json_arguments(
                ctx.chat, ctx.model, stream, ev),
        "test_responses.py::test_bad_requests_get_an_error_envelope":
            lambda: test_responses.test_bad_requests_get_an_error_envelope(ctx.chat, ctx.model, ev),
        "test_responses.py::test_max_output_tokens_ends_the_response_incomplete":
            lambda: test_responses.test_max_output_tokens_ends_the_response_incomplete(ctx.chat, ctx.model,
                                                                                       stream, ev),
        "test_responses.py::test_openai_sdk_reads_responses": lambda: _sdk_check(ctx, ev),
        "test_responses.py::test_stream_events_are_numbered_in_sequence":
            lambda: test_responses.test_stream_events_are_numbered_in_sequence(ctx.chat, ctx.model, ev),
        "test_responses.py::test_stream_events_carry_their_output_and_content_index":
            lambda: test_responses.test_stream_events_carry_their_output_and_content_index(
                ctx.chat, ctx.model, ev),
        "test_responses.py::test_text_format_json_schema_is_enforced":
            lambda: test_responses.test_text_format_json_schema_is_enforced(ctx.chat, ctx.model, stream, ev),
        "test_responses.py::test_text_format_json_object_answers_a_json_object":
            lambda: test_responses.test_text_format_json_object_answers_a_json_object(
                ctx.chat, ctx.model, stream, ev),
        "test_responses.py::test_a_streamed_function_call_ends_with_its_arguments_done":
            lambda: test_responses.test_a_streamed_function_call_ends_with_its_arguments_done(
                ctx.chat, ctx.model, ev),
        "test_responses.py::test_a_mid_stream_error_comes_as_an_error_event":
            lambda: test_responses.test_a_mid_stream_error_comes_as_an_error_event(ctx.chat, ctx.model, ev),
    }
    call = calls.get(check)
    return None if call is None else judged(call)


def _sdk_check(ctx: Context, ev: Evidence) -> None:
    """The SDK check with an openai-python client on the SDK's own httpx, its traffic recorded."""
    import openai

    hx = sdk_httpx()
    with hx.Client(transport=recording_transport(hx, ctx.exchanges),
                   timeout=hx.Timeout(ctx.timeout, connect=5.0)) as http_client:
        client = openai.OpenAI(base_url=f"{ctx.base_url}/v1", api_key="sk-no-key-needed", max_retries=0,
                               http_client=http_client)
        test_responses.test_openai_sdk_reads_responses(client, ctx.model, ev)


def robustness_case(case_id: str, ctx: Context) -> Verdict | None:
    """Send a catalogue case and judge it by the status policy, as the robustness suite does."""
    case = CASES_BY_ID.get(case_id)
    if case is None:
        return None
    embeddings = case.endpoint == "embeddings"
    spec = build(case, Params(model=ctx.model, embedding_model=ctx.embedding_model))
    answer = send(ctx.embeddings if embeddings else ctx.chat, spec, timeout=ctx.timeout)
    judgement = classify(case, answer.status, answer.body, answer.elapsed, policy="standard",
                         error=answer.error, prompt_words=spec.prompt_words)
    said = f"{judgement.outcome}: {judgement.reason}"
    return (True, said) if judgement.outcome == "fail" else (False, said)


def fuzz_counterexample(ctx: Context) -> Verdict:
    """Send the fuzz suite's shrunk counterexample and judge it as a generated request is judged."""
    body = json.dumps({"model": ctx.model, **FUZZ_COUNTEREXAMPLE}).encode()
    spec = RequestSpec(case_id="fuzz", method="POST", path=CHAT_PATH, headers={"Content-Type": JSON_TYPE},
                       body=body)
    answer = send(ctx.chat, spec, timeout=ctx.timeout)
    judgement = classify(FUZZ_CASE, answer.status, answer.body, answer.elapsed, policy="strict",
                         error=answer.error)
    said = f"{judgement.outcome}: {judgement.reason}"
    return (True, said) if judgement.outcome == "fail" else (False, said)


def probe(capability: str, ctx: Context) -> Verdict | None:
    """Run a capability probe as the plugin does: broken is the finding."""
    probes = {"tool_choice_required": probe_tool_choice_required,
              "tool_choice_named": probe_tool_choice_named}
    run = probes.get(capability)
    if run is None:
        return None
    # The plugin probes `tools` (tool_choice auto, the same prompt) before the forced choices, so the
    # server has seen the prompt once when the forced answer is set against the auto one; a cold first
    # request can differ from a warm one at temperature 0 on llama-server (its prompt cache).
    probe_tools(ctx.chat, ctx.server)
    got = run(ctx.chat, ctx.server)
    return got.status == "broken", f"probe {got.status}: {got.detail}"


def split_id(finding: str) -> tuple[str, str | None]:
    """'mod.py::test_x[p]' -> ('mod.py::test_x', 'p')."""
    if finding.endswith("]") and "[" in finding:
        name, param = finding[:-1].split("[", 1)
        return name, param
    return finding, None


def replay(finding: str, ctx: Context) -> Verdict:
    """Replay one finding by its id; a finding this script has no replay for is not judged."""
    if finding.startswith("probe "):
        got = probe(finding.removeprefix("probe "), ctx)
    elif finding.startswith("test_robustness.py::"):
        got = robustness_case(split_id(finding)[1] or "", ctx)
    elif finding.startswith("test_fuzz.py::"):
        got = fuzz_counterexample(ctx)
    else:
        got = suite_check(*split_id(finding), ctx)
    return got if got is not None else (None, "no replay for this finding in this script")


def findings_of(path: Path) -> list[str]:
    """Every failed check of an expectations file, then every capability a check was skipped on as broken."""
    checks: dict[str, dict[str, Any]] = json.loads(path.read_text())["checks"]
    failed = [name for name, row in checks.items() if row.get("outcome") == "failed"]
    broken = sorted({str(row["skip"]).removeprefix("broken: ").strip() for row in checks.values()
                     if str(row.get("skip", "")).startswith("broken: ")})
    return failed + [f"probe {cap}" for cap in broken]


# --- printing --------------------------------------------------------------------------------------------

def answer_head(exchange: Exchange) -> str:
    """The part of an answer worth reading: a JSON body's head, or a stream's event count and edges."""
    if exchange.error:
        return f"no answer: {exchange.error}"
    text = bytes(exchange.answer).decode("utf-8", "replace")
    if "event-stream" in exchange.content_type:
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        if len(data) <= 3:
            return excerpt(" | ".join(data), ANSWER_SHOWN)
        return (f"{len(data)} data events; first: {excerpt(data[0], 150)} | second: {excerpt(data[1], 150)}"
                f" | last: {excerpt(data[-1], 200)}")
    return excerpt(text.strip(), ANSWER_SHOWN)


def curl_of(exchange: Exchange) -> str:
    """The exchange's request as a curl command (bodies over 2,000 characters are generated inline)."""
    url = httpx.URL(exchange.url)
    root = f"{url.scheme}://{url.netloc.decode()}"
    path = url.raw_path.decode()
    return render_curl(root, exchange.method, path, exchange.headers, exchange.body)


def show(result: Result, out: Callable[[str], None]) -> None:
    """Print one replayed finding: its requests, their answers and the verdict."""
    out(f"\n=== {result.finding}")
    for n, exchange in enumerate(result.exchanges, 1):
        out(f"  [{n}] {curl_of(exchange)}")
        out(f"      -> HTTP {exchange.status}: {answer_head(exchange)}")
    out(f"  check: {result.said}")
    out(f"  reproduced: {result.word}")


def table(results: list[Result]) -> str:
    """The closing table: finding, reproduced."""
    width = max([len(r.finding) for r in results] + [7])
    rows = [f"{'finding'.ljust(width)}  reproduced", f"{'-' * width}  ----------"]
    rows += [f"{r.finding.ljust(width)}  {r.word}" for r in results]
    yes = sum(1 for r in results if r.reproduced)
    rows.append(f"{yes} of {len(results)} findings reproduced")
    return "\n".join(rows)


# --- the servers -----------------------------------------------------------------------------------------

@contextlib.contextmanager
def preset_servers(threads: int | None, log_dir: Path) -> Iterator[tuple[str, str]]:
    """Start the llama-cpp preset's chat and embedding servers on free loopback ports; stop both after."""
    from pytest_inferaccept.launcher import ServerProcess, free_port
    from pytest_inferaccept.servers import is_prepared, prepare

    if not is_prepared(PRESET):
        raise SystemExit(f"the {PRESET} preset is not prepared: run `python -m pytest_inferaccept.servers "
                         f"install {PRESET}` first, or give --server-url")
    recipe = prepare(PRESET, log=lambda _line: None)
    started: list[ServerProcess] = []
    urls: list[str] = []
    try:
        for name, spec in (("chat", recipe.chat), ("embeddings", recipe.embeddings)):
            if spec is None:
                urls.append(urls[0])
                continue
            port = free_port()
            argv = spec.argv_for(port) + (["-t", str(threads)] if threads else [])
            proc = ServerProcess(argv, log_path=log_dir / f"replay-{name}.log", env=spec.env)
            started.append(proc)
            url = f"http://127.0.0.1:{port}"
            print(f"started {name} server (pid {proc.pid}): {proc.command}", flush=True)
            proc.wait_ready(url, timeout=spec.ready_timeout, paths=(spec.ready_path,))
            urls.append(url)
        yield urls[0], urls[1]
    finally:
        for proc in started:
            proc.stop()
            print(f"stopped pid {proc.pid}", flush=True)


def first_model(client: httpx.Client) -> str:
    """The first model a server lists on /v1/models."""
    resp = client.get("/v1/models")
    resp.raise_for_status()
    return str(resp.json()["data"][0]["id"])


def build_info(client: httpx.Client) -> str:
    """The server's build as /props names it (llama-server), or '' elsewhere."""
    with contextlib.suppress(Exception):
        resp = client.get("/props")
        if resp.status_code == 200:
            props = resp.json()
            return str(props.get("build_info") or "")
    return ""


def run(args: argparse.Namespace, base_url: str, embedding_url: str) -> int:
    """Replay every selected finding against the servers at these URLs; the exit status."""
    exchanges: list[Exchange] = []
    recorder = recording_transport(httpx, exchanges)
    timeout = httpx.Timeout(args.timeout, connect=5.0)
    with httpx.Client(base_url=base_url, transport=recorder, timeout=timeout) as chat, \
            httpx.Client(base_url=embedding_url, transport=recorder, timeout=timeout) as embeddings:
        model = args.model or first_model(chat)
        embedding_model = args.embedding_model or first_model(embeddings)
        ctx = Context(chat, embeddings, exchanges, base_url, embedding_url, model, embedding_model,
                      args.timeout)
        build = build_info(chat)
        print(f"replay of {args.expectations.name} on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC: "
              f"chat {base_url} ({model}{', build ' + build if build else ''}), "
              f"embeddings {embedding_url} ({embedding_model})", flush=True)
        findings = [f for f in findings_of(args.expectations)
                    if not args.only or any(word in f for word in args.only)]
        results: list[Result] = []
        for finding in findings:
            before = len(exchanges)
            started = time.monotonic()
            reproduced, said = replay(finding, ctx)
            result = Result(finding, reproduced, f"{said} ({time.monotonic() - started:.1f}s)",
                            exchanges[before:])
            results.append(result)
            show(result, lambda line: print(line, flush=True))
    print("\n" + table(results))
    if args.json:
        args.json.write_text(json.dumps(
            {"base_url": base_url, "model": model, "build": build,
             "results": [{"finding": r.finding, "reproduced": r.reproduced, "said": r.said,
                          "requests": [{"curl": curl_of(e), "status": e.status, "answer": answer_head(e)}
                                       for e in r.exchanges]} for r in results]}, indent=1))
    return 0 if results and all(r.reproduced for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, find or start the servers, replay, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--server-url", help="the chat server's root (default: start the llama-cpp preset)")
    parser.add_argument("--embedding-url", help="the embedding server's root (default: --server-url)")
    parser.add_argument("--model", help="the chat model (default: the first on /v1/models)")
    parser.add_argument("--embedding-model",
                        help="the embedding model (default: the first on its /v1/models)")
    parser.add_argument("--expectations", type=Path, default=EXPECTATIONS,
                        help="the expectations file whose findings are replayed")
    parser.add_argument("--only", action="append", default=[],
                        help="replay only findings whose id contains this text (repeatable)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    parser.add_argument("--threads", type=int, help="-t for the servers this script starts")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp"),
                        help="where the started servers write their logs")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    args = parser.parse_args(argv)
    if args.server_url:
        return run(args, args.server_url.rstrip("/"), (args.embedding_url or args.server_url).rstrip("/"))
    with preset_servers(args.threads, args.log_dir) as (chat_url, embedding_url):
        return run(args, chat_url, embedding_url)


if __name__ == "__main__":
    sys.exit(main())
