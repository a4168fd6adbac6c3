import os
import sys
from pathlib import Path

# Tests that run programs under XLA need 8 CPU devices; set before anything imports jax.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

# Make the helper module `corpus` importable from the tests.
sys.path.insert(0, str(Path(__file__).parent))
