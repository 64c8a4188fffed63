"""``cuproject_record``: the test project built once a session through the launcher (see
tests/cuproject_record.py, loaded by path: the tests run in importlib mode)."""

import importlib.util
import sys
from pathlib import Path

_NAME = "_nvstage_cuproject_record"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parents[1] / "cuproject_record.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])

cuproject_record = sys.modules[_NAME].cuproject_record
