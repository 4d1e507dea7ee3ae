"""A one-line progress report (records, percent, rate, ETA) on a terminal; silent when stderr is piped."""

from __future__ import annotations

import time
from typing import IO, Optional

REFRESH_SECONDS = 0.25


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Redraws one line in place while work goes on, then leaves a summary line.

    ``done`` counts records; ``fraction`` (0..1, when the total is known,
    e.g. the position in the Data.fs) gives the percentage and the ETA.
    """

    def __init__(self, label: str, stream: IO[str], enabled: Optional[bool] = None) -> None:
        self.label = label
        self.stream = stream
        if enabled is None:
            isatty = getattr(stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._width = 0
        self.done = 0

    def update(self, done: int, fraction: Optional[float] = None) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last_draw < REFRESH_SECONDS:
            return
        self._last_draw = now
        self._draw(self._line(now, fraction))

    def _line(self, now: float, fraction: Optional[float]) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        line = f"{self.label}: {self.done} records, {rate:,.0f}/s, {_clock(elapsed)} elapsed"
        if fraction is not None and 0 < fraction <= 1:
            bar = "#" * int(fraction * 20)
            eta = elapsed * (1 - fraction) / fraction
            line = f"{self.label}: [{bar:<20}] {fraction:4.0%} {self.done} records, {rate:,.0f}/s, ETA {_clock(eta)}"
        return line

    def _draw(self, line: str) -> None:
        pad = " " * max(self._width - len(line), 0)
        self._width = len(line)
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()

    def close(self) -> None:
        """Replace the moving line by the final count and rate (only on a terminal)."""
        if self.enabled:
            elapsed = max(time.monotonic() - self.start, 1e-9)
            self._draw(f"{self.label}: {self.done} records in {_clock(elapsed)}, {self.done / elapsed:,.0f}/s")
            self.stream.write("\n")
            self.stream.flush()
