"""The ``zodb-json-codec`` command's entry point, outside the package on purpose.

Importing ``zodb_json_codec`` (the codec and its twins) takes a moment, and a
Ctrl-C in that moment would end the command with Python's own traceback.
This module imports nothing before it can catch that, so Ctrl-C at any
moment ends the command with one line and exit status 130.  Once the
command is done, a Ctrl-C while Python shuts down is ignored: the command's
own exit status stands.
"""

import signal
import sys
from typing import Optional

INTERRUPTED = 130


def main() -> int:
    status: Optional[int] = None
    try:
        from zodb_json_codec.cli import main as run

        status = run()
    except KeyboardInterrupt:
        if status is None:
            print("zodb-json-codec: interrupted; nothing was written", file=sys.stderr)
            status = INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status
