"""nvstage.paths: which folder the stage cache is in. An empty ``$NVSTAGE_CACHE_DIR`` means
unset (as most tools read an empty variable); only blanks are an error."""

from __future__ import annotations

import json

from nvstage.compiler.launcher.resident import ask
from nvstage.paths import cache_dir_of


def test_an_empty_cache_dir_is_unset_and_blanks_name_no_folder():
    env = {"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"}
    assert cache_dir_of({**env, "NVSTAGE_CACHE_DIR": ""}) == cache_dir_of(env) == "/xdg/nvstage"
    assert cache_dir_of({**env, "NVSTAGE_CACHE_DIR": " "}) is None  # cache_dir: an error


def test_an_empty_cache_dir_asks_the_server_an_unset_one_asks():
    # The hit socket's name is made from the variables that pick the cache folder: empty and
    # unset pick one folder, so they meet one resident nvstage.
    env = {"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg", "LANG": "C.UTF-8"}
    assert ask.name({**env, "NVSTAGE_CACHE_DIR": ""}) == ask.name(env)
    assert ask.name({**env, "NVSTAGE_CACHE_DIR": "/c"}) != ask.name(env)
    assert ask.name({**env, "LANG": ""}) != ask.name(env)  # elsewhere empty is no unset


def test_the_cache_command_reads_an_empty_variable_as_unset(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", "")
    r = cli("cache", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["dir"] == str(tmp_path / "xdg" / "nvstage")
