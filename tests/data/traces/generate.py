"""Write the small public-format trace samples in this folder from a seed (run it to regenerate them).

    python tests/data/traces/generate.py

- mooncake_sample.jsonl: 40 requests in the Mooncake trace format: `timestamp` in ms from the
  start, `input_length` and `output_length` in tokens, `hash_ids` one id per 512-token block,
  new ids numbered on from the last one used. Some requests start with the same two blocks (a
  shared system prompt, ids 0 and 1); some continue an earlier request's conversation (its full
  blocks, then new ones). Prompts are at most three blocks long.
- azure_sample.csv: 30 rows in the Azure LLM inference trace format: a header
  `TIMESTAMP,ContextTokens,GeneratedTokens`, date-times with seven fractional digits.
- azure_light.csv: 80 rows in the same format, about a second apart (1.17 requests/s), prompts of
  about 90 tokens and answers of 1 to 32: the trace docs/servers/capacity.md replays against
  llama-server at speed factors.

The figures are drawn, not taken from any published trace.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCK = 512
SEED = 29


def mooncake_lines(seed: int = SEED, n: int = 40) -> list[str]:
    """The Mooncake sample's lines: arrivals about 150 ms apart, prefixes shared as described above."""
    rng = random.Random(seed)
    next_id = 2  # 0 and 1 are the shared system prompt's blocks
    sent: list[list[int]] = []
    lines: list[str] = []
    clock_ms = 0
    for i in range(n):
        if i:
            clock_ms += max(1, round(rng.expovariate(1 / 150)))
        if sent and rng.random() < 0.3:
            earlier = rng.choice(sent)
            head = earlier[:-1] if len(earlier) > 1 else []  # the full blocks; the last one was partial
        elif rng.random() < 0.5:
            head = [0, 1]
        else:
            head = []
        # At most three blocks (1,536 tokens), so that a prompt and its answer fit the fake
        # server's 2,048-token context window in the replay test.
        new_blocks = rng.randint(1, 3 - len(head))
        ids = head + list(range(next_id, next_id + new_blocks))
        next_id += new_blocks
        input_length = (len(ids) - 1) * BLOCK + rng.randint(1, BLOCK)
        sent.append(ids)
        lines.append(json.dumps({"timestamp": clock_ms, "input_length": input_length,
                                 "output_length": rng.randint(4, 48), "hash_ids": ids}))
    return lines


def azure_lines(seed: int = SEED, n: int = 30, *, gap_s: float = 0.2, mu: float = 5.5, sigma: float = 0.8,
                longest: int = 2000, most_out: int = 64,
                clock: datetime = datetime(2023, 11, 16, 18, 15, 46, 680590)) -> list[str]:
    """Azure-format lines: a header, then rows `gap_s` apart on average (exponential gaps), context
    lengths log-normal (`mu`, `sigma`, at most `longest`), answers of 1 to `most_out` tokens."""
    rng = random.Random(seed + 1)
    ticks = 0  # 100 ns ticks past `clock`, the trace's own resolution
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(n):
        if i:
            ticks += max(1, round(rng.expovariate(1 / gap_s) * 10_000_000))
        at = clock + timedelta(microseconds=ticks // 10)
        stamp = at.strftime("%Y-%m-%d %H:%M:%S") + f".{at.microsecond:06d}{ticks % 10}"
        context = min(longest, max(20, round(rng.lognormvariate(mu, sigma))))
        lines.append(f"{stamp},{context},{rng.randint(1, most_out)}")
    return lines


def azure_light_lines() -> list[str]:
    """The light trace: 80 rows about a second apart, short prompts and answers."""
    return azure_lines(10, 80, gap_s=1.0, mu=4.5, sigma=0.6, longest=600, most_out=32,
                       clock=datetime(2023, 11, 16, 18, 0, 0))


def main() -> None:
    """Write the samples next to this script."""
    (HERE / "mooncake_sample.jsonl").write_text("\n".join(mooncake_lines()) + "\n", encoding="utf-8")
    (HERE / "azure_sample.csv").write_text("\n".join(azure_lines()) + "\n", encoding="utf-8")
    (HERE / "azure_light.csv").write_text("\n".join(azure_light_lines()) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
