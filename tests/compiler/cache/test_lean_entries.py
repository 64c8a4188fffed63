"""Lean entries: a hit writes only what the build needs now (no intermediate without --keep,
counted), and a damaged compressed entry is a miss, never a wrong object."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.cache.stage import lazy
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.nvcc.options import CompileOptions

GENCODES = ("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    return root


@pytest.fixture
def written(monkeypatch):
    """Every file a build copies out of an entry, and every stage run again for a file an
    entry does not hold: (paths, stage kinds)."""
    paths: list[str] = []
    again: list[str] = []
    restore, replay = Cache.restore, lazy.Lazy._replay

    def counted_restore(self, entry, dests, work=None):
        got = restore(self, entry, dests, work)
        if got is not None:
            paths.extend(str(d) for d in dests if d is not None)
        return got

    def counted_replay(self, stage, entry):
        again.append((stage.kind.value, [Path(p).name for p in stage.inputs]))
        return replay(self, stage, entry)

    monkeypatch.setattr(Cache, "restore", counted_restore)
    monkeypatch.setattr(lazy.Lazy, "_replay", counted_replay)
    return paths, again


def _source(workdir: Path, scale: str = "3.0f") -> None:
    (workdir / "k.cu").write_text(f"#define SCALE {scale}\n"
                                  "__global__ void k(float* p) { p[threadIdx.x] *= SCALE; }\n")


def _build(extra: tuple[str, ...] = ()):
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, output="k.o", extra=extra)
    return nvstage.compile("k.cu", opts, jobs=2)


def _mask(data: bytes) -> bytes:
    """nvcc's pid in its temporary names masked (test_launcher_bytes.py's rule)."""
    return re.sub(rb"tmpxft_[0-9a-f]{8}_", b"<run>", data)


def _intermediates(paths: list[str], workdir: Path) -> list[str]:
    """What was written into the work folder (everything outside the current folder)."""
    return sorted(Path(p).name for p in paths if not p.startswith(str(workdir)))


def test_a_full_hit_writes_no_intermediate_without_keep(toolkit, workdir, written):
    _source(workdir)
    cold = _build()
    obj = (workdir / "k.o").read_bytes()
    paths, again = written
    paths.clear()
    hit = _build()
    assert all(r.cached for r in hit.runs if r.stage.kind.value != "cleanup")
    assert (workdir / "k.o").read_bytes() == obj
    # Only ptxas's cubins (the build record reads its kernels' figures from them): no
    # preprocessed source, no cudafe1.cpp, PTX, module id or fatbinary; nothing made again.
    wrote = _intermediates(paths, workdir)
    assert len(wrote) == 2 and all(n.endswith(".cubin") for n in wrote), wrote  # two archs
    assert again == []
    assert [str(workdir / "k.o")] == [p for p in paths if p.startswith(str(workdir))]
    assert cold.status == hit.status == "ok"


def test_a_partial_hit_writes_only_what_a_stage_that_runs_reads(toolkit, workdir, written):
    _source(workdir)
    _build()
    paths, again = written
    paths.clear()
    # ptxas's options changed: the preprocessors, cudafe++ and cicc hit, ptxas runs (its
    # cubins differ), and so do fatbinary and the host compile after it.
    part = _build(("-Xptxas", "-O1"))
    ran = [r for r in part.runs if not r.cached and r.stage.kind.value != "cleanup"]
    hits = [r for r in part.runs if r.cached]
    assert ran and hits and part.status == "ok"
    assert {r.stage.kind.value for r in ran} >= {"ptxas"}
    # Read by a stage that ran, or by a stage run again to make such a file (and the files
    # a stage reads without naming them: the module id, the stub and fatbinary C sources).
    needed = {Path(p).name for r in ran for p in r.stage.inputs} | \
        {n for _, inputs in again for n in inputs}
    wrote = _intermediates(paths, workdir)
    hidden = (".cubin", ".module_id", ".stub.c", ".fatbin.c")
    assert all(n in needed or n.endswith(hidden) for n in wrote), (wrote, needed)
    assert all(kind in ("host-preprocess", "device-preprocess", "cudafe++", "fatbinary")
               for kind, _ in again)
    if "host-compile" not in {r.stage.kind.value for r in ran}:
        assert not any(n.endswith((".ii", ".cudafe1.cpp")) for n in wrote), wrote
    plain = CompileOptions(gencodes=GENCODES, compile_only=True, output="ref.o",
                           extra=("-Xptxas", "-O1"))
    nvstage.compile("k.cu", plain, jobs=2, cache=False)
    assert _mask((workdir / "k.o").read_bytes()) == _mask((workdir / "ref.o").read_bytes())


def test_a_corrupted_compressed_entry_is_a_miss(toolkit, workdir, private_cache):
    _source(workdir)
    _build()
    obj = (workdir / "k.o").read_bytes()
    frames = sorted(p for p in (private_cache / "entries").rglob("*") if p.is_file()
                    and p.read_bytes()[:4] == ZSTD_MAGIC and p.stat().st_size > 64)
    assert frames, "entries are stored as zstd frames"
    for p in frames:  # one byte flipped in the middle of every compressed file
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))
    (workdir / "k.o").unlink()
    again = _build()
    assert again.status == "ok" and again.cache["corrupt"] >= 1
    assert (workdir / "k.o").read_bytes() == obj
