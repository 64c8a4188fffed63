"""The build record's folder, and the entry a whole-command hit adds to it.

``buildlog`` reads and writes the record (one JSON file per nvcc command under ``tu/``); what a
hit needs of it is here, standard library only: where the folder is, how it is made, and the
hit's own entry, written as text around the manifest the sealed entry kept, so that a hit
parses nothing it does not need.
"""

from __future__ import annotations

import os

from nvstage import fsio
from nvstage.compiler.warm.folder import MAX_META

ENV = "NVSTAGE_BUILD_RECORD"
FOLDER = ".nvstage-build"
MARK = "NVSTAGE_BUILD_RECORD"
SCHEMA = "nvstage.build-record/1"


def record_folder(cwd: str, env) -> str:
    """Where the build record is: ``$NVSTAGE_BUILD_RECORD`` (relative to ``cwd``), else
    ``.nvstage-build`` in ``cwd``."""
    given = env.get(ENV, "").strip()
    return os.path.abspath(os.path.join(cwd, given)) if given else os.path.join(cwd, FOLDER)


def ready_record(folder: str) -> bool:
    """The record folder, its ``tu/`` and its mark, made if missing; False when they cannot
    be (a build record that cannot be written never fails the build)."""
    try:
        os.makedirs(os.path.join(folder, "tu"), exist_ok=True)
        mark = os.path.join(folder, MARK)
        if not os.path.exists(mark):
            with open(mark, "w") as f:
                f.write(f"{SCHEMA}: one file per nvcc command under tu/\n")
    except OSError:
        return False
    return True


def add_hit(served: dict) -> None:
    """The build-record entry of a hit (``answer.try_hit``'s ``served``): the manifest the
    command's last staged run made, marked as answered whole from the cache."""
    import time
    from _json import encode_basestring_ascii as q  # the C encoder: the json package is not

    s = served
    folder = record_folder(s["cwd"], s["env"])
    # Only the manifest the sealed entry names (a shared cache's folder is not trusted).
    build = fsio.read_or_none(s["build"], MAX_META)
    if build is not None:
        from nvstage.compiler.warm import zstd

        try:
            build = zstd.decompress(build, MAX_META)
        except (ValueError, ImportError):
            build = None
    if build is None or fsio.hexdigest(build) != s.get("build_sha"):
        build = b"null"
    text = (f'{{"schema":"{SCHEMA}","argv":[' + ",".join(map(q, s["argv"]))
            + f'],"cwd":{q(s["cwd"])},"started":{s["started"]!r},'
            f'"seconds":{round(time.perf_counter() - s["t0"], 6)!r},"status":"ok",'
            f'"exit_code":0,"pid":{os.getpid()},"reason":null,"hit":true').encode()
    name = f"{int(s['started'] * 1e6):017d}-{os.getpid()}-h.json"
    if not ready_record(folder):
        return
    try:
        fsio.replace(os.path.join(folder, "tu", name), text + b',"build":' + build + b"}")
    except OSError:
        pass  # a build record that cannot be written never fails the build
