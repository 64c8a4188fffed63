"""Every command's --json on the bundled kernels and examples is what it was when the golden
files were captured (tests/golden/capture.py), up to what two runs of one command differ in."""

import importlib.util
import json
from pathlib import Path

import pytest

# capture.py is also a script; loaded by path (pytest runs in importlib mode).
_spec = importlib.util.spec_from_file_location("golden_capture",
                                               Path(__file__).with_name("capture.py"))
_capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_capture)
GOLDEN, capture = _capture.GOLDEN, _capture.capture


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    return capture(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.json")))
def test_json_output_unchanged(captured, name):
    want = json.loads((GOLDEN / f"{name}.json").read_text())
    if captured[name] != want:
        import difflib

        a = json.dumps(want, indent=1, sort_keys=True).splitlines()
        b = json.dumps(captured[name], indent=1, sort_keys=True).splitlines()
        diff = "\n".join(list(difflib.unified_diff(a, b, "golden", "now", lineterm="", n=2))[:120])
        pytest.fail(f"nvstage {name}: --json changed (capture.py --write after a deliberate "
                    f"change):\n{diff}", pytrace=False)
