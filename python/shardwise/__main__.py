"""``python -m shardwise``: the ``shardwise`` command line (``shardwise.cli``)."""

from shardwise.cli import run

run()
