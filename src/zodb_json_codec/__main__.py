"""``python -m zodb_json_codec``: the command line of cli.py."""

import signal
import sys

from .cli import main

status = main()
signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a Ctrl-C while Python shuts down leaves the status as it is
sys.exit(status)
