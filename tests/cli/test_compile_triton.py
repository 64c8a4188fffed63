"""nvstage compile FILE.py --via triton: the command line, its help, its one-line errors."""

from __future__ import annotations

import json

import pytest


def _args(kit, keep, *more):
    return ["compile", str(kit.CHAIN), "--via", "triton", "--kernel", "fused", "--signature",
            kit.CHAIN_SIGNATURES["fused"], "--constexpr", "BLOCK=1024", "--arch", "sm_90",
            "--keep-dir", str(keep), *more]


def test_compile_json(cli, triton_kit, tmp_path):
    r = cli(*_args(triton_kit, tmp_path / "f.triton", "--json", "--num-warps", "8"))
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["via"] == "triton" and doc["status"] == "ok"
    assert [s["kind"] for s in doc["stages"]] == ["source", "ttir", "ttgir", "llir", "ptx",
                                                   "ptxas"]
    assert doc["triton"]["num_warps"] == 8 and doc["triton"]["kernel"] == "fused"
    assert doc["keep_dir"] == str(tmp_path / "f.triton")
    # The tables went to stderr: the stage table and Triton's own.
    assert "ttgir" in r.stderr and "num_warps 8 (256 threads per block)" in r.stderr


def test_compile_table_and_show(cli, triton_kit, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(*_args(triton_kit, tmp_path / "f.triton", "--show", "resources", "-o", "f.cubin"))
    assert r.exit_code == 0, r.stderr
    assert "fused.ttgir" in r.stdout and "FP fusion" in r.stdout
    assert "resources" in r.stdout and "sm_90a" in r.stdout
    assert (tmp_path / "f.cubin").read_bytes() == (tmp_path / "f.triton" / "fused.cubin"
                                                   ).read_bytes()


def test_show_without_keep_names_no_folder(cli, triton_kit, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _args(triton_kit, "x")
    i = args.index("--keep-dir")
    r = cli(*args[:i], "--show", "resources", "-o", "f.cubin")
    assert r.exit_code == 0, r.stderr
    assert "resources" in r.stdout and "stages in" in r.stderr
    # The temporary folder --show read from is gone: the summary does not name it.
    assert "kept in" not in r.stderr and "nvstage-show-" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.cubin"]


def test_keep_names_the_folder_after_the_kernel(cli, triton_kit, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _args(triton_kit, "x")
    i = args.index("--keep-dir")
    r = cli(*args[:i], "--keep")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "fused.nvstage" / "stages.json").is_file()


def test_help_says_the_file_is_imported(cli):
    r = cli("compile", "--via", "triton", "--help")
    assert r.exit_code == 0
    assert "imported (run as Python)" in r.stdout and "never imported" in r.stdout
    assert "--via nvcc|nvrtc|triton" in cli("compile", "--help").stdout


@pytest.mark.parametrize("args,said,code", [
    (["k.py", "--via", "triton"], "--via triton needs --kernel NAME", 2),
    (["--via", "triton", "--kernel", "k"], "give one Python file", 2),
    (["k.py", "--via", "triton", "--kernel", "k", "-Xptxas", "-v"],
     "--via triton does not take -Xptxas", 2),
    (["k.py", "--via", "triton", "--kernel", "k", "--fp-fusion", "maybe"], "choose on or off", 2),
    (["k.py", "--via", "triton", "--kernel", "k", "--num-warps", "four"],
     "give a whole number", 2),
    (["missing.py", "--via", "triton", "--kernel", "k"], "no such file: missing.py", 2),
])
def test_one_line_errors(cli, tmp_path, monkeypatch, args, said, code):
    monkeypatch.chdir(tmp_path)
    r = cli("compile", *args)
    assert r.exit_code == code
    assert said in r.stderr and "Traceback" not in r.stderr


def test_without_triton_one_line(cli, tmp_path, monkeypatch):
    import sys

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text("")
    monkeypatch.setitem(sys.modules, "triton", None)
    r = cli("compile", "k.py", "--via", "triton", "--kernel", "k")
    assert r.exit_code == 3
    assert "pip install -e '.[triton]' in nvstage's checkout, or pip install triton==3.9.0" \
        in r.stderr and "Traceback" not in r.stderr
