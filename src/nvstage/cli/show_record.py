"""``nvstage show BUILD`` for a build record without ``--kernel``: every kernel the build made,
and what changed since the build before it (apart from show.py, so that stays thin)."""

from __future__ import annotations

from nvstage.cli.common import emit_json
from nvstage.report.terminal.console import data_console


def show_record(artifact, json_out: bool) -> None:
    from nvstage.inspect.build_view import load_build_view
    from nvstage.inspect.build_log_diff import since_previous
    from nvstage.report.terminal.build_log import render_view

    view = load_build_view(artifact)
    changes = since_previous(view)
    render_view(view, data_console(json_out), changes=changes)
    if json_out:
        emit_json({**view.to_json(), "since_previous": changes and changes.to_json()})
