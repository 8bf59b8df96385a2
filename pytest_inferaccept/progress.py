"""Progress of a long phase (a server being built or started, a load level running) as terminal lines.

No pytest here: the session hands a Progress a function that writes one whole line (the plugin's
writes through the terminal reporter with capture suspended, and writes nothing under -q).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

Write = Callable[[str], None]
FIRST_AFTER = 5.0
"""Seconds before a phase shows its first line: a short phase shows none."""
EVERY = 10.0
"""Seconds between two lines of one phase, at least."""


def clock_text(seconds: float) -> str:
    """'7 s', '2 min 05 s'."""
    # Whole seconds, rounded down: a line never claims more time than has passed.
    if seconds < 60:
        return f"{int(seconds)} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class Progress:
    """One long phase: `update(text)` as often as convenient, a line shows only when one is due.

    A line reads "inferaccept: PHASE (ELAPSED): TEXT". The first comes `first_after` seconds into
    the phase, the next no sooner than `every` seconds after it; `done(text)` closes the phase
    with one more line, but only when the phase showed any (a quick phase stays silent).
    """

    def __init__(self, phase: str, write: Write, *, first_after: float = FIRST_AFTER,
                 every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.phase = phase
        self._write = write
        self._every = every
        self._clock = clock
        self.started = clock()
        self._next = self.started + first_after
        self.lines = 0
        """How many lines this phase has shown."""
        self.finished = False

    @property
    def elapsed(self) -> float:
        """Seconds since the phase began."""
        return self._clock() - self.started

    def update(self, text: str) -> bool:
        """Show `text` if a line is due; True when one was written. Cheap when none is."""
        now = self._clock()
        if self.finished or now < self._next:
            return False
        self._next = now + self._every
        self._emit(f"inferaccept: {self.phase} ({clock_text(now - self.started)}): {text}")
        return True

    def done(self, text: str = "finished") -> None:
        """End the phase; say so (with the time it took) only if it showed progress before."""
        if self.finished:
            return
        self.finished = True
        if self.lines:
            self._emit(f"inferaccept: {self.phase} (done in {clock_text(self.elapsed)}): {text}")

    def _emit(self, line: str) -> None:
        self.lines += 1
        self._write(line)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.done("finished" if kind is None else f"stopped ({kind.__name__})")
