"""``python -m zodb_json_codec``: the command line of cli.py."""

import sys

from .cli import main

sys.exit(main())
