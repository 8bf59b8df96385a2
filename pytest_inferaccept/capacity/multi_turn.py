"""Multi-turn conversations: every turn resends the history; TTFT per turn index.

Whether TTFT grows with the history, and how fast per 1000 prompt tokens, beside the server's
prefix-cache counters (docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.effects import (
    client_limited,
    fresh_seed,
    pct,
    prefix_counters,
    ratio,
    ttft,
    usable_input,
)
from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Measure,
    Say,
    conclude,
    error_statuses,
    ms,
    not_measured,
    quiet,
    step_row,
    telemetry_of,
)
from pytest_inferaccept.load.compound import ConversationWorkload
from pytest_inferaccept.model import CapacityFindings, CapacityParams, TurnStep, WholeRun

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler


def _prompt_tokens(row: TurnStep) -> float:
    """The turn's prompt tokens: as the server counted them, else as asked."""
    return float(row.prompt_tokens_p50 if row.prompt_tokens_p50 is not None else row.prompt_tokens_asked or 0)


def _slope_per_1k(rows: Sequence[TurnStep]) -> float | None:
    """Least-squares seconds of TTFT p50 per 1000 prompt tokens over the turns (usage, else asked)."""
    points = [(_prompt_tokens(r), float(r.ttft_p50)) for r in rows if r.ttft_p50 is not None]
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / sxx


def multi_turn(
    measure: Measure,
    sampler: Sampler,
    *,
    conversations: int = 8,
    turns: int = 6,
    concurrency: int = 8,
    user_tokens: int = 96,
    answer_tokens: int = 64,
    context_window: int | None,
    duration: float,
    seed: int | None = None,
    label: str,
    say: Say = quiet,
) -> CapacityResult:
    """`conversations` chats of `turns` turns at `concurrency`, each turn resending the history:
    TTFT per turn index, and whether it grows with the history."""
    base = fresh_seed(seed)
    notes: list[str] = []
    if concurrency > conversations:
        notes.append(f"concurrency {concurrency} lowered to {conversations}, the number of conversations "
                     "(a conversation's turns go out one after the other)")
        concurrency = conversations
    cap = usable_input(context_window, answer_tokens)
    asked_turns = turns
    while cap is not None and turns > 1 and (
            turns * user_tokens + (turns - 1) * answer_tokens + 8 * turns > cap):
        turns -= 1
    if turns < asked_turns:
        notes.append(f"turns capped at {turns} of {asked_turns}: the history must fit the context window "
                     f"({context_window})")
    workload = ConversationWorkload(conversations=conversations, turns=turns, user_tokens=user_tokens,
                                    answer_tokens=answer_tokens, max_tokens=answer_tokens, seed=base)
    with sampler:
        t0 = sampler.now()
        # No warm-up (it would send the first turns twice, and the second time from the cache); one
        # worker process, so the positions go out in one order.
        result = measure("multi-turn", concurrency=concurrency, requests=conversations * turns,
                         duration=duration, warmup=0, workers=1, workload=workload)
        peaks = sampler.peaks(t0, sampler.now())
    overall = step_row(concurrency, result, peaks, into=WholeRun)
    rows: list[TurnStep] = []
    for t in range(turns):
        tag = f"turn={t + 1}"
        sent = [r for r in result.records if not r.warmup and tag in r.tags]
        ok = [r for r in sent if r.ok]
        rows.append(TurnStep(
            level=t + 1, turn=t + 1, label=overall.label, sent=len(sent), succeeded=len(ok),
            failed=len(sent) - len(ok), ttft_p50=ttft(ok, 0.5), ttft_p95=ttft(ok, 0.95),
            e2e_p50=pct([r.e2e for r in ok], 0.5), prompt_tokens_p50=pct([r.prompt_tokens for r in ok], 0.5),
            prompt_tokens_asked=workload.prompt_tokens(t),
            client_bound=overall.client_bound if t == 0 else [],
        ))
    cache = prefix_counters(result)
    measured = [r for r in rows if r.ttft_p50 is not None]
    first, last = (measured[0], measured[-1]) if measured else (None, None)
    growth = ratio(last.ttft_p50, first.ttft_p50) if first and last and last is not first else None
    unreached = [r.turn for r in rows if not r.sent]
    notes += [
        f"each earlier answer is resent as a fixed stand-in of {answer_tokens} words, not the server's "
        "real answer: the engine builds every request before the previous turn's answer is known",
        "turn-major order: every conversation's turn t goes out before any conversation's turn t+1",
    ]
    if unreached:
        notes.append(f"turns {unreached[0]}-{unreached[-1]} were not reached within {duration:g} s")
    if first is None or last is None:
        headline = "no turn was answered"
    elif growth is None:
        headline = f"only turn {first.turn} was answered: TTFT p50 {ms(first.ttft_p50)}"
    else:
        # Both turns' sizes as the first one's was counted (usage, else as asked).
        counted = first.prompt_tokens_p50 is not None
        first_size, last_size = ((first.prompt_tokens_p50, last.prompt_tokens_p50) if counted
                                 else (first.prompt_tokens_asked, last.prompt_tokens_asked))
        assert first.ttft_p50 is not None and last.ttft_p50 is not None
        change = last.ttft_p50 - first.ttft_p50
        how = ("grows with the history" if growth >= 1.5 and change > 0.01 else
               "falls as the history grows" if growth <= 1 / 1.5 and change < -0.01 else
               "stays about flat as the history grows")
        headline = (
            f"TTFT p50 {how}: {ms(first.ttft_p50)} at turn {first.turn} ({first_size:.0f} prompt "
            f"tokens) → {ms(last.ttft_p50)} at turn {last.turn} ({last_size:.0f}), ×{growth:.1f}; "
            f"{conversations} conversations at c={concurrency}; prefix cache {cache.text}"
        )
    if unreached and first is not None:
        headline += f"; turns {unreached[0]}-{unreached[-1]} not reached within {duration:g} s"
    return conclude(
        kind="multi_turn",
        label=label,
        steps=rows,
        params=CapacityParams(conversations=conversations, turns=turns, turns_asked=asked_turns,
                              concurrency=concurrency, user_tokens=user_tokens, answer_tokens=answer_tokens,
                              context_window=context_window, max_seconds=duration, seed=base),
        headline=headline,
        slo=result.slo,
        bound=client_limited([overall]),
        judged=[] if measured else [("fail", "no turn was answered" + error_statuses(overall))],
        findings=CapacityFindings(ttft_p50_by_turn={r.turn: r.ttft_p50 for r in rows}, growth_p50=growth,
                                  ttft_s_per_1k_prompt_tokens=_slope_per_1k(measured), prefix_cache=cache,
                                  overall=overall),
        telemetry=telemetry_of(sampler),
        notes=[*notes, *not_measured(sampler)],
    )
