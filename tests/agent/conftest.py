import sys
from pathlib import Path

# The helpers next to these tests (agent_fakes) are imported by name.
sys.path.insert(0, str(Path(__file__).parent))
