"""Where the tests' data lives, for test modules in any layer folder (``from paths import ROOT, TESTS``).

``tests/conftest.py`` puts this folder on ``sys.path``; the data folders (``models*/``, ``golden/``,
``agent_replays/``) and the shared helpers (``strategies.py``, ``inprocess.py``, ...) stay here, beside it.
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
