"""What a hint tells the user to install exists: nvstage's extras from its checkout, or the
extras' own packages as pyproject.toml pins them; never ``pip install nvstage`` or
``'nvstage[EXTRA]'``, a package on no index (someone else's, if anyone's)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from nvstage import extras

ROOT = Path(__file__).resolve().parent.parent
# `pip install nvstage`, `nvstage[triton]`, 'nvstage[remote]': the name of a package on no index.
_STRANGER = re.compile(r"pip install\s+['\"]?nvstage\b|\bnvstage\[\w+\]")


def test_each_extra_names_the_packages_pyproject_pins():
    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra, packages in extras.PACKAGES.items():
        assert list(packages) == pinned[extra], extra


def test_hints_install_from_the_checkout_or_the_packages_themselves():
    assert extras.TRITON == ("pip install -e '.[triton]' in nvstage's checkout, or pip install "
                             "triton==3.9.0")
    assert extras.REMOTE.endswith("pip install 'cryptography>=42'")  # quoted: > redirects


def test_no_hint_or_skip_reason_names_nvstage_as_a_package():
    here = Path(__file__).resolve()
    files = [*(ROOT / "src").rglob("*.py"),
             *(p for p in (ROOT / "tests").rglob("*.py")
               if not p.name.startswith(("test_readme", "test_docs")) and p != here)]
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if _STRANGER.search(line) and "no package index" not in line]  # the rule said
    assert not found, found
