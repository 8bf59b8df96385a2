"""Determinism beside other traffic and across the prefix cache: fillers that keep a server busy, and
the tally of how repeats of one request differ from its reference answer.

Each repeat is compared with the reference by the near-tie rule (`correctness.ties.classify`):
identical, a near tie (the first differing token was a near-even pick), a real change, or, when
the server returns no logprobs, a change that cannot be classified. A team that declares the
server batch-invariant (`--capabilities batch_invariant`) is held to identical answers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.correctness.ties import TieCheck, TokenLogprobs, classify

if TYPE_CHECKING:
    import httpx

CHAT_PATH = "/v1/chat/completions"
FILLERS = 8
"""Concurrent filler requests kept in flight while a probe is answered."""
FILLER_TOKENS = (16, 32, 48, 64)
"""max_tokens of the fillers, in turn: mixed lengths, so the probe meets a batch that changes."""
FILLER_PROMPTS = (
    "Say hello.",
    "List five colours, one per line, and say one thing about each.",
    "Here is a note from a ship's log. Day one: fair wind from the west, we made good speed along the "
    "coast and saw a pod of dolphins at noon. Day two: the wind dropped, the crew mended the sails and "
    "the cook ran short of flour. Day three: fog all morning, a bell buoy guided us past the reef, and "
    "in the evening the harbour lights came into view. Summarise the voyage in a few sentences.",
)
"""Short, medium and long prompts, so the fillers' prefills differ too."""
LOAD_SECONDS = 150.0
"""The fillers stop starting requests after this long, whatever the check still does."""
MAX_FILLER_REQUESTS = 400
"""At most this many filler requests per load, however fast the server answers them."""
BUSY_TIMEOUT = 30.0
"""Seconds to wait for the first fillers to be answered before a probe is sent anyway."""


# --- answers -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """The first choice of a non-streamed chat completion, with what proves a prefix-cache hit."""

    text: str
    finish_reason: str | None
    logprobs: list[dict[str, Any]] | None
    cached_tokens: int | None = None
    """Prompt tokens the server says it read from its prefix cache (None: it says nothing)."""
    cache_source: str | None = None
    """Where `cached_tokens` came from (a response field's path)."""
    prompt_tokens: int | None = None


def cached_tokens(data: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The prompt tokens an answer says came from the prefix cache, and the field that says so:
    OpenAI's usage.prompt_tokens_details.cached_tokens, else llama-server's timings.cache_n or
    tokens_cached."""
    usage = data.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, Mapping) else None
    if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
        return int(details["cached_tokens"]), "usage.prompt_tokens_details.cached_tokens"
    timings = data.get("timings")
    if isinstance(timings, Mapping) and isinstance(timings.get("cache_n"), int):
        return int(timings["cache_n"]), "timings.cache_n"
    if isinstance(data.get("tokens_cached"), int):
        return int(data["tokens_cached"]), "tokens_cached"
    return None, None


def read_answer(data: Mapping[str, Any]) -> Answer:
    """An Answer from a chat completion's JSON (KeyError/IndexError/TypeError when it has no choice)."""
    choice = data["choices"][0]
    content = choice["message"].get("content")
    kept = choice.get("logprobs")
    logprobs = kept.get("content") if isinstance(kept, Mapping) else None
    cached, source = cached_tokens(data)
    usage = data.get("usage")
    prompt = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
    return Answer(text=content if isinstance(content, str) else "", finish_reason=choice.get("finish_reason"),
                  logprobs=logprobs if isinstance(logprobs, list) and logprobs else None,
                  cached_tokens=cached, cache_source=source,
                  prompt_tokens=prompt if isinstance(prompt, int) else None)


# --- the tally and the judgement --------------------------------------------------------------------------


def _logprob_of(entry: Mapping[str, Any], token: str) -> float | None:
    """The logprob a position gives `token` (the pick or one of its top alternatives; None: not listed)."""
    if entry.get("token") == token and isinstance(entry.get("logprob"), int | float):
        return float(entry["logprob"])
    for alt in entry.get("top_logprobs") or ():
        if not isinstance(alt, Mapping) or alt.get("token") != token:
            continue
        if isinstance(alt.get("logprob"), int | float):
            return float(alt["logprob"])
    return None


def _figure(value: float | None) -> str:
    return "not in its top alternatives" if value is None or not math.isfinite(value) else f"{value:.3f}"


def describe_change(check: TieCheck, a: TokenLogprobs | None, b: TokenLogprobs | None,
                    names: tuple[str, str] = ("the reference", "the repeat")) -> str:
    """Where two answers part, with both tokens' logprobs in both answers where they were returned."""
    if check.position is None or check.tokens is None or not a or not b:
        return check.reason
    i = check.position
    pick_a, pick_b = check.tokens
    return (f"at token {i} {names[0]} picked {pick_a!r} (logprob {_figure(_logprob_of(a[i], pick_a))}; "
            f"{pick_b!r} {_figure(_logprob_of(a[i], pick_b))}) and {names[1]} picked {pick_b!r} (logprob "
            f"{_figure(_logprob_of(b[i], pick_b))}; {pick_a!r} {_figure(_logprob_of(b[i], pick_a))}): "
            f"{check.reason}")


@dataclass
class Repeat:
    """One repeat compared with its reference."""

    label: str
    """What was repeated, and how (prompt and condition)."""
    check: TieCheck
    detail: str
    """describe_change of the two answers."""
    busy: int | None = None
    """Fillers being answered when the repeat was sent (None: sent without load)."""


@dataclass
class Tally:
    """Repeats of one or more requests against their references: identical / near tie / real change."""

    repeats: list[Repeat] = field(default_factory=list)

    def add(self, label: str, reference: Answer, repeat: Answer, busy: int | None = None,
            names: tuple[str, str] = ("the reference", "the repeat")) -> Repeat:
        """Compare one repeat with its reference and keep the result."""
        check = classify(reference.logprobs, repeat.logprobs, text_a=reference.text, text_b=repeat.text)
        row = Repeat(label, check, describe_change(check, reference.logprobs, repeat.logprobs, names), busy)
        self.repeats.append(row)
        return row

    def counts(self) -> dict[str, int]:
        """How many repeats were identical, near ties, real changes and changes without logprobs."""
        kinds = ("same", "near_tie", "real_change", "not_classifiable")
        return {kind: sum(r.check.kind == kind for r in self.repeats) for kind in kinds}

    def classifiable(self) -> bool:
        """Every differing repeat could be classified (the server returned logprobs for it)."""
        return not self.counts()["not_classifiable"]

    def describe(self) -> str:
        """One line: the counts out of the repeats, and whether logprobs allowed the classification."""
        c = self.counts()
        line = (f"{len(self.repeats)} repeats: {c['same']} identical, {c['near_tie']} near ties, "
                f"{c['real_change']} real changes")
        if c["not_classifiable"]:
            line += (f", {c['not_classifiable']} changed without logprobs to tell a near tie from a real "
                     "change (changed vs identical only)")
        return line

    def to_json(self) -> dict[str, object]:
        """The figures for the results, with each differing repeat's detail."""
        c = self.counts()
        return {"repeats": len(self.repeats), "identical": c["same"], "near_tie": c["near_tie"],
                "real_change": c["real_change"], "changed_unclassified": c["not_classifiable"],
                "differences": [{"repeat": r.label, "kind": r.check.kind, "position": r.check.position,
                                 "detail": r.detail, **({"busy": r.busy} if r.busy is not None else {})}
                                for r in self.repeats if r.check.kind != "same"]}

    def failing(self, *, strict: bool) -> list[Repeat]:
        """The repeats that fail the check: any difference when `strict` (batch-invariant declared),
        else real changes and changes no logprobs could classify."""
        bad = ("real_change", "not_classifiable", *(("near_tie",) if strict else ()))
        return [r for r in self.repeats if r.check.kind in bad]


# --- fillers ---------------------------------------------------------------------------------------------


def filler_body(model: str, k: int) -> dict[str, Any]:
    """The k-th filler request: streamed, sampled, of the k-th prompt and length in turn."""
    return {"model": model, "stream": True, "temperature": 0.8,
            "max_tokens": FILLER_TOKENS[k % len(FILLER_TOKENS)],
            "messages": [{"role": "user", "content": FILLER_PROMPTS[k % len(FILLER_PROMPTS)]}]}


class Fillers:
    """`count` streamed chat requests kept in flight (each worker sends the next when one ends) until
    the block ends, `seconds` pass or `max_requests` were sent: the traffic a probe shares batches with."""

    def __init__(self, client: httpx.Client, model: str, count: int = FILLERS, *,
                 seconds: float = LOAD_SECONDS, max_requests: int = MAX_FILLER_REQUESTS) -> None:
        import httpx

        # A client of their own: closing it at the end unblocks a filler still waiting for its answer.
        # A fresh connection per filler: llama-server b11434 closes a connection after a streamed
        # answer without saying so, and a reused one fails ("Server disconnected").
        self._client = httpx.Client(base_url=client.base_url, headers=client.headers,
                                    timeout=httpx.Timeout(60.0, connect=10.0),
                                    limits=httpx.Limits(max_connections=count + 2,
                                                        max_keepalive_connections=0))
        self.model = model
        self.count = count
        self.seconds = seconds
        self.max_requests = max_requests
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.sent = 0
        self.completed = 0
        self.streaming = 0
        """Fillers whose first event has arrived and whose answer is not finished: in the batch now."""
        self.most_streaming = 0
        self.errors: list[str] = []

    def __enter__(self) -> Fillers:
        deadline = time.monotonic() + self.seconds
        for i in range(self.count):
            thread = threading.Thread(target=self._work, args=(i, deadline), daemon=True,
                                      name=f"inferaccept-filler-{i}")
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._client.close()
        for thread in self._threads:
            thread.join(timeout=5.0)

    def _take(self) -> int | None:
        with self._lock:
            if self.sent >= self.max_requests:
                return None
            self.sent += 1
            return self.sent - 1

    def _work(self, worker: int, deadline: float) -> None:
        import httpx

        while not self._stop.is_set() and time.monotonic() < deadline:
            k = self._take()
            if k is None:
                return
            began = False
            try:
                with self._client.stream("POST", CHAT_PATH, json=filler_body(self.model, worker + k)) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        self._error(f"HTTP {resp.status_code}: {resp.text[:200]}")
                        self._stop.wait(0.2)
                        continue
                    for line in resp.iter_lines():
                        if self._stop.is_set():
                            break
                        if not began and line.startswith("data:"):
                            began = True
                            with self._lock:
                                self.streaming += 1
                                self.most_streaming = max(self.most_streaming, self.streaming)
                    else:
                        with self._lock:
                            self.completed += 1
            except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: the client closed at the end
                if not self._stop.is_set():
                    self._error(f"{type(exc).__name__}: {exc}")
            finally:
                if began:
                    with self._lock:
                        self.streaming -= 1

    def _error(self, what: str) -> None:
        with self._lock:
            if len(self.errors) < 20:
                self.errors.append(what)

    def busy(self) -> int:
        """Fillers being answered now."""
        with self._lock:
            return self.streaming

    def wait_busy(self, timeout: float = BUSY_TIMEOUT, settle: float = 0.3) -> int:
        """Wait until fillers are being answered (every one, or as many as stay steady for `settle`
        seconds: a server with fewer slots queues the rest), at most `timeout`; return how many are."""
        end = time.monotonic() + timeout
        least = min(self.count, 2)
        seen, since = -1, time.monotonic()
        while time.monotonic() < end:
            now = self.busy()
            if now >= self.count:
                return now
            if now != seen:
                seen, since = now, time.monotonic()
            elif now >= least and time.monotonic() - since >= settle:
                return now
            time.sleep(0.02)
        return self.busy()

    def to_json(self) -> dict[str, object]:
        """What the fillers did: how many were sent, finished, at most answered at once, and their errors."""
        return {"fillers": self.count, "sent": self.sent, "completed": self.completed,
                "most_in_batch": self.most_streaming, "errors": list(self.errors)}


# --- prefix-cache proof ------------------------------------------------------------------------------------


PREFIX_CACHE_COUNTERS = ("prefix_cache_hits", "cache_hit")
"""Parts of the /metrics counter names that count prefix-cache hits (vLLM, SGLang, others)."""


def cache_counters(text: str) -> dict[str, float]:
    """The prefix-cache hit counters of a Prometheus text (summed over labels), by name."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if not any(part in name for part in PREFIX_CACHE_COUNTERS):
            continue
        try:
            value = float(line.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def counter_growth(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The counters that grew between two scrapes, and by how much."""
    return {name: value - before.get(name, 0.0) for name, value in after.items()
            if value > before.get(name, 0.0)}


@dataclass(frozen=True)
class CacheProof:
    """Whether the warm answer was shown to come from the prefix cache, and by what."""

    proven: bool
    how: str


def cache_proof(warm: Sequence[Answer], control: Answer | None, warm_growth: Mapping[str, float],
                control_growth: Mapping[str, float]) -> CacheProof:
    """A cache hit is proven when every warm answer says it read more prompt tokens from the cache
    than the different-prefix control did, or, without such a field, when a /metrics prefix-cache
    hit counter grew more over a warm request than over the control (growths per request)."""
    counted = [a.cached_tokens for a in warm if a.cached_tokens is not None]
    if counted and len(counted) == len(warm):
        source = warm[0].cache_source
        base = control.cached_tokens if control is not None and control.cached_tokens is not None else 0
        figures = ", ".join(f"{n} of {a.prompt_tokens if a.prompt_tokens is not None else '?'}"
                            for n, a in zip(counted, warm, strict=True))
        if min(counted) > base:
            return CacheProof(True, f"{source}: the warm requests read {figures} prompt tokens from the "
                                    f"cache, the different-prefix control {base}")
        return CacheProof(False, f"{source}: the warm requests read {figures} prompt tokens from the cache, "
                                 f"not more than the different-prefix control's {base}: no hit shown")
    grown = {name: value for name, value in warm_growth.items() if value > control_growth.get(name, 0.0)}
    if grown:
        figures = ", ".join(f"{name} +{value:g} per warm request, +{control_growth.get(name, 0.0):g} for the "
                            "control" for name, value in sorted(grown.items()))
        return CacheProof(True, f"/metrics prefix-cache counters: {figures}")
    return CacheProof(False, "no proof of a cache hit was seen: no cached_tokens, timings.cache_n or "
                             "tokens_cached in the answers, and no /metrics prefix-cache counter grew more "
                             "over a warm request than over the different-prefix control")
