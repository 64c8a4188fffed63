"""Starting the resident nvstage (``server.py``) for the next commands: a launcher that ran a
command itself, or answered a hit with no server to ask, starts one where it is on
(unless ``NVSTAGE_SERVER=0``) and none runs. Apart from the server, which imports the
launcher's flow (that calls this): no module imports another that imports it back.
"""

from __future__ import annotations

import os
import socket
import sys

from nvstage.compiler.launcher.resident import handover as client


def ensure(root: str, env) -> None:
    """Start a server for the cache folder ``root`` unless one runs (never an error); the
    caller (``flow.start_resident``) asked whether the resident is on."""
    path = client.socket_path(root, env)
    if not client.own_folder(os.path.dirname(path), make=True):
        return
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return  # one is there
    except OSError:
        pass
    finally:
        s.close()
    from nvstage import proc

    try:
        proc.start_detached([sys.executable, "-m", "nvstage.compiler.launcher.resident.server",
                             root], env=dict(env))
    except OSError:
        pass
