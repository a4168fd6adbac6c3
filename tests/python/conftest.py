import sys
from pathlib import Path

# Make the helper module `corpus` importable from the tests.
sys.path.insert(0, str(Path(__file__).parent))
