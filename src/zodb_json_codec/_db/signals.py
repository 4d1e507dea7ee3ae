"""Ctrl-C held back for a moment: where a command makes something it must remove again if interrupted.

A KeyboardInterrupt can arrive between any two bytecodes.  Between making a
temporary file (or directory, or worker process) and the line that takes
charge of removing it there is such a moment; in it, Ctrl-C would leave the
thing behind.  Made with SIGINT blocked, and recorded before the block ends,
it is always in charge: a Ctrl-C that came meanwhile is delivered when the
block ends.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block (and in a process it starts: workers inherit it)."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no such signal mask
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
