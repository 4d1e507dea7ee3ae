"""The ``zodb-json-codec`` command's entry point, outside the package on purpose.

Importing ``zodb_json_codec`` (the codec and its twins) takes a moment, and a
Ctrl-C in that moment would end the command with Python's own traceback.
This module imports nothing before it can catch that, so Ctrl-C at any
moment ends the command with one line and exit status 130.
"""

import sys

INTERRUPTED = 130


def main() -> int:
    try:
        from zodb_json_codec.cli import main as run
    except KeyboardInterrupt:
        print("zodb-json-codec: interrupted; nothing was written", file=sys.stderr)
        return INTERRUPTED
    return run()
