"""``python -m shardwise``: the ``shardwise`` command line (``shardwise.cli``)."""

import sys

from shardwise.cli import main

sys.exit(main())
