"""--help as a newcomer reads it: what the source writes in <angle brackets> or [brackets] is
on the screen as written (the help is plain text: no Markdown to eat them), indented examples
keep their lines, the examples run as shown after the README's first step, and options say
what a file holds instead of naming a Python function."""

from __future__ import annotations

import json
import re
import shlex

import pytest

_ANGLED = re.compile(r"\\?<([^<>\s\\][^<>\\]*)\\?>")
_NOT_TEXT = re.compile(r"[\s│╭╮╰╯─]+")  # blanks, and the frames of typer's option panels


def _commands():
    import typer.main

    from nvstage.cli.app import app

    return typer.main.get_command(app).commands


def _help_sources(cmd) -> list[str]:
    return [cmd.help or "", cmd.epilog or ""] + \
        [getattr(p, "help", None) or "" for p in cmd.params]


@pytest.mark.parametrize("name", sorted(_commands()))
def test_angle_brackets_in_help_are_shown(cli, monkeypatch, name):
    wanted = {m.group(1) for text in _help_sources(_commands()[name])
              for m in _ANGLED.finditer(text)}
    monkeypatch.setenv("COLUMNS", "120")
    r = cli(name, "--help")
    assert r.exit_code == 0, r.output
    shown = _NOT_TEXT.sub("", r.stdout)
    for inner in sorted(wanted):
        assert _NOT_TEXT.sub("", f"<{inner}>") in shown, (name, inner)


def test_indented_blocks_keep_their_lines_and_brackets(cli, monkeypatch):
    """Prose reflows; an indented block (check's TOML tables, every example) is printed line
    for line, and [tool.nvstage] is shown as written."""
    monkeypatch.setenv("COLUMNS", "100")
    out = cli("check", "--help").stdout
    lines = [ln.strip() for ln in out.splitlines()]
    assert "max_registers = 64" in lines
    assert any(ln.startswith("no_spills = true") for ln in lines)  # its own line, not joined
    assert "[tool.nvstage.budgets]" in out and "\\[" not in out
    assert "nvstage check kernels/saxpy.cu --config budgets.toml" in lines


def _examples(name: str) -> list[list[str]]:
    return [shlex.split(line.strip())[1:] for line in (_commands()[name].help or "").splitlines()
            if line.strip().startswith(f"nvstage {name} ")]


def test_occupancy_examples_run_after_the_readme_first_step(cli, workdir, kernels):
    # README, step 1: nvstage compile kernels/vadd.cu --arch sm_90 -o vadd --keep
    r = cli("compile", kernels / "vadd.cu", "--arch", "sm_90", "-o", "vadd", "--keep")
    assert r.exit_code == 0, r.output
    examples = _examples("occupancy")
    assert len(examples) >= 3
    for argv in examples:
        r = cli(*argv)
        assert r.exit_code == 0, (argv, r.output)
        assert "occupancy" in r.stdout, argv


def test_gpu_spec_help_says_what_the_file_holds(cli, workdir, monkeypatch):
    from nvstage.hw import gpus

    monkeypatch.setenv("COLUMNS", "120")
    for name in ("model", "compare"):
        text = _NOT_TEXT.sub(" ", cli(name, "--help").stdout)
        assert "nvstage.hw" not in text and "load_gpu_spec" not in text
        for key in gpus._REQUIRED:
            assert key in text, (name, key)
        assert "bytes/s" in text and "FLOP/s" in text and 'base = "h100"' in text
    # a file written from the help alone is one the command takes
    (workdir / "mine.toml").write_text(
        'name = "mine"\narch = "sm_90"\nsm_count = 100\nmemory_bandwidth = 2.0e12\n'
        'fp32_flops = 40.0e12\n')
    spec = gpus.choose_gpu(None, workdir / "mine.toml")
    assert (spec.name, spec.sm_count) == ("mine", 100)
    (workdir / "based.json").write_text(json.dumps({"base": "h100", "sm_count": 114}))
    assert gpus.choose_gpu(None, workdir / "based.json").sm_count == 114
