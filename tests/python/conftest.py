import os
import signal
import sys
from pathlib import Path

# A pytest started in the background by a non-interactive shell inherits SIGINT as ignored, and
# Python then installs no KeyboardInterrupt handler: the Ctrl-C tests (and the children they
# start) need the default one, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests that run programs under XLA need 8 CPU devices; set before anything imports jax.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

# Make the helper module `corpus` importable from the tests.
sys.path.insert(0, str(Path(__file__).parent))
