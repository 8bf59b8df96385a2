"""Fixtures for acceptance tests: the server under test, its clients, model names, evidence."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_inferaccept.markers import slo_in_force
from pytest_inferaccept.plugin.keys import CAPACITY_KEY, EVIDENCE_KEY, LOAD_KEY, SESSION_KEY, SLO_KEY
from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    import httpx
    import openai

    from pytest_inferaccept.evidence import Evidence
    from pytest_inferaccept.loadgen import LoadGen
    from pytest_inferaccept.server import ServerUnderTest


def _evidence(node: pytest.Item) -> Evidence:
    from pytest_inferaccept.evidence import Evidence

    return node.stash.setdefault(EVIDENCE_KEY, Evidence())


@pytest.fixture(scope="session")
def inferaccept_server(request: pytest.FixtureRequest) -> ServerUnderTest:
    """The server under test: base URL, model, capabilities, version info, log path."""
    server: ServerUnderTest = request.config.stash[SESSION_KEY].servers.server()
    return server


@pytest.fixture(scope="session")
def inferaccept_settings(request: pytest.FixtureRequest) -> Settings:
    """The run's resolved settings (command line, then ini, then environment); frozen."""
    settings: Settings = request.config.stash[SESSION_KEY].settings
    return settings


@pytest.fixture(scope="session")
def model(request: pytest.FixtureRequest, inferaccept_server: ServerUnderTest) -> str:
    """Name of the chat model under test (--model, or the first of /v1/models).

    With --all-models a core check gets each listed model in turn (its test id names it).
    """
    given = getattr(request, "param", None)
    return str(given) if given is not None else inferaccept_server.model


@pytest.fixture(scope="session")
def embedding_model(inferaccept_server: ServerUnderTest) -> str:
    """Name of the embedding model (--embedding-model, or discovered); skips when none is known."""
    if not inferaccept_server.embedding_model:
        pytest.skip("unsupported: no embedding model known (give --embedding-model)")
    return inferaccept_server.embedding_model


@pytest.fixture
def inferaccept_evidence(request: pytest.FixtureRequest) -> Evidence:
    """Recorder for this test's evidence (notes, warnings, measured values) shown in reports."""
    return _evidence(request.node)


def _client(request: pytest.FixtureRequest, base_url: str) -> httpx.Client:
    from pytest_inferaccept.http import client_for

    node = request.node
    return client_for(request.config.stash[SESSION_KEY].settings, base_url, evidence=lambda: _evidence(node))


@pytest.fixture
def http_client(request: pytest.FixtureRequest,
                inferaccept_server: ServerUnderTest) -> Iterator[httpx.Client]:
    """An httpx client on the server root for raw protocol probes; exchanges become evidence."""
    with _client(request, inferaccept_server.base_url) as client:
        yield client


@pytest.fixture
def embedding_http_client(request: pytest.FixtureRequest,
                          inferaccept_server: ServerUnderTest) -> Iterator[httpx.Client]:
    """An httpx client on the embedding endpoint's root (--embedding-url or the server)."""
    with _client(request, inferaccept_server.embedding_url or inferaccept_server.base_url) as client:
        yield client


@pytest.fixture(scope="session")
def openai_client(request: pytest.FixtureRequest,
                  inferaccept_server: ServerUnderTest) -> Iterator[openai.OpenAI]:
    """The official OpenAI SDK client configured for the server (no retries, plugin timeouts)."""
    from pytest_inferaccept.http import make_openai_client

    settings = request.config.stash[SESSION_KEY].settings
    client: openai.OpenAI = make_openai_client(settings, inferaccept_server.api_base, asynchronous=False)
    yield client
    client.close()


@pytest.fixture
def loadgen(request: pytest.FixtureRequest, inferaccept_server: ServerUnderTest) -> LoadGen:
    """Load generator for this test: `loadgen.run(concurrency=8, requests=200, workload=...)`.

    Every run is judged when the test ends against the test's @pytest.mark.slo (else the
    session's --slo / --slo-profile); `await loadgen.arun(...)` is the async twin.
    """
    from pytest_inferaccept.loadgen import LoadGen, TestLedger

    session = request.config.stash[SESSION_KEY]
    node = request.node
    in_force = slo_in_force(node.stash.get(SLO_KEY, None), session.settings.load.slo)
    ledger = TestLedger(runs=node.stash.setdefault(LOAD_KEY, []),
                        scenarios=node.stash.setdefault(CAPACITY_KEY, []),
                        records=session.ledger.load_runs, history=session.ledger.capacity_results,
                        say=session.progress_line, mark_invalid=_evidence(node).mark_invalid)
    servers = session.servers
    launched = None
    if inferaccept_server.launched:  # read the process's memory from /proc, also from an xdist worker
        launched = servers.processes[0].pid if servers.processes else servers.adopted_pid
    # Only the process that launched the server can restart it (an xdist worker only adopted it).
    restart = servers.restart_chat_server if inferaccept_server.launched and servers.processes else None

    def reasons() -> bool:
        # one chat request, once a session (the capability probe, shared with the matrix)
        return session.capabilities.probe("reasoning").status == "supported"

    return LoadGen(server=inferaccept_server, settings=session.settings,
                   slo=in_force.slo, label=node.nodeid, ledger=ledger,
                   launched_pid=launched, restart=restart, reasons=reasons)


SERVER_FIXTURES: frozenset[str] = frozenset({
    "inferaccept_server", "model", "embedding_model", "http_client", "embedding_http_client",
    "openai_client", "async_openai_client", "loadgen",
})
"""Fixtures that need the server; a test using one is an acceptance test."""
ACCEPTANCE_FIXTURES: frozenset[str] = SERVER_FIXTURES | {"inferaccept_evidence"}
