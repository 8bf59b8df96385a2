"""The fake server's own account of each streamed chat answer, for checking a client's figures.

Off by default. With `FakeConfig.timing_log` (CLI `--timing-log PATH`) set, the fake appends one
JSON line per streamed chat answer: its response id and its own timestamps of the request's
arrival and of every chunk it wrote, each taken just before the write (so a client on the same
machine can never stamp a chunk earlier than the server did). The clock is `time.perf_counter`,
the load engine's clock; on Linux both are CLOCK_MONOTONIC, which all processes on one machine
share, so a client's timestamps there can be compared with these directly. A line looks like:

    {"id": "chatcmpl-…", "received": 812.401, "role": [812.402], "content": [812.453, …],
     "chunks": 35, "end": 812.774}

`received`: the handler began (headers parsed); `role`: each empty role-only chunk; `content`:
each chunk carrying content text; `chunks`: every data event written except `[DONE]`; `end`:
`[DONE]`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

clock = time.perf_counter


class StreamMarks:
    """When one streamed answer's chunks were written (seconds on `clock`)."""

    __slots__ = ("chunks", "content", "received", "role")

    def __init__(self, received: float) -> None:
        self.received = received
        self.role: list[float] = []
        self.content: list[float] = []
        self.chunks = 0

    def note(self, kind: str) -> None:
        """A chunk of `kind` ("role", "content" or anything else) is written now."""
        now = clock()
        self.chunks += 1
        if kind == "content":
            self.content.append(now)
        elif kind == "role":
            self.role.append(now)


class TimingLog:
    """An append-only JSONL file of StreamMarks, one line per finished answer."""

    def __init__(self, path: str | Path) -> None:
        # Held open for the server's life (one line per answer) and closed on app cleanup.
        self._fh = Path(path).open("a", encoding="utf-8")  # noqa: SIM115

    def write(self, response_id: str, marks: StreamMarks, end: float) -> None:
        """Append one answer's line (buffered; flushed on close)."""
        self._fh.write(json.dumps({"id": response_id, "received": marks.received, "role": marks.role,
                                   "content": marks.content, "chunks": marks.chunks, "end": end},
                                  separators=(",", ":")) + "\n")

    def close(self) -> None:
        """Flush and close the file."""
        self._fh.close()
