"""Reading the JSON and TOML documents a user hands nvstage, with one clear error each.

A path that is missing, a folder, unreadable, not text, not JSON/TOML, or not a table ends in
one message that names the file and what it was meant to be; callers choose the error class
(its exit code) and add their own schema checks on the dict they get back.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path

from nvstage.errors import ArtifactError, InputNotFound, InputTooLarge, NotRegularFile, NvstageError

ErrorFactory = Callable[..., NvstageError]  # (message, hint=...) -> the error to raise

# The most a document reader takes. Workloads, cost files, GPU specs and budgets are written
# by hand; manifests, run reports and traces by nvstage, the largest (a trace of many
# launches) a few MB. A file past this is refused before it is read.
MAX_DOCUMENT_BYTES = 64 << 20  # 64 MiB


def read_text_doc(path: str | os.PathLike, what: str, err: ErrorFactory = ArtifactError) -> str:
    """The text of ``path``, a ``what``: InputNotFound when it is missing, ``err`` when it
    is a folder, a FIFO or device (refused unread: reading one could block forever), larger
    than ``MAX_DOCUMENT_BYTES``, unreadable or not UTF-8 text (a binary file by mistake)."""
    from nvstage.files import read_regular, shown_path

    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputNotFound(f"no such {what} file: {shown_path(p)}") from None
    except (OSError, ValueError) as e:  # a name too long, a loop of links, no access
        raise err(f"cannot read the {what} {shown_path(p)}: "
                  f"{getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISDIR(mode):
        raise err(f"{p} is a folder, not a {what}", hint=f"give the path of the {what} itself")
    try:
        raw = read_regular(p, limit=MAX_DOCUMENT_BYTES, limit_name="MAX_DOCUMENT_BYTES",
                           what=what)
    except InputNotFound:
        raise InputNotFound(f"no such {what} file: {p}") from None
    except (NotRegularFile, InputTooLarge) as e:
        raise err(e.message.replace("a regular file", f"a {what}", 1), hint=e.hint) from None
    except NvstageError as e:
        raise err(f"cannot read the {what} {p}: {e.message}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise err(f"{p} is not a {what}: not text (a binary file?)") from None


def load_json_doc(path_or_doc, what: str, err: ErrorFactory = ArtifactError) -> dict:
    """A JSON object from a file (or a dict, returned as it is)."""
    if isinstance(path_or_doc, dict):
        return path_or_doc
    text = read_text_doc(path_or_doc, what, err)
    doc = parse_json_text(text, f"{path_or_doc} is not a {what}", err)
    if not isinstance(doc, dict):
        raise err(f"{path_or_doc} is not a {what}: a JSON {type(doc).__name__}, not an object")
    return doc


def load_toml_doc(path: str | os.PathLike, what: str, err: ErrorFactory = ArtifactError) -> dict:
    """A TOML document from a file."""
    text = read_text_doc(path, what, err)
    return parse_toml_text(text, f"{path} is not valid TOML", err)


def parse_json_text(text: str, lead: str, err: ErrorFactory = ArtifactError):
    """``json.loads``, with every way hostile text fails it as one ``err``: bad JSON, an
    integer past Python's 4300-digit conversion limit (a ValueError), nesting too deep for
    the parser (a RecursionError)."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise err(f"{lead}: not JSON ({e})") from None
    except RecursionError:
        raise err(f"{lead}: not JSON (nested too deeply)") from None


def parse_toml_text(text: str, lead: str, err: ErrorFactory = ArtifactError, hint=None):
    """``tomllib.loads``, failing as ``parse_json_text`` does (tomllib too raises a plain
    ValueError for an integer of more than 4300 digits, and RecursionError on deep arrays)."""
    try:
        return tomllib.loads(text)
    except ValueError as e:  # TOMLDecodeError is one
        raise err(f"{lead}: {e}", hint=hint) from None
    except RecursionError:
        raise err(f"{lead}: nested too deeply", hint=hint) from None


def load_run_doc(path_or_doc, what: str = "run report", err: ErrorFactory = ArtifactError
                 ) -> dict:
    """A run document (``nvstage run --profile --json FILE``, schema ``nvstage.run/1``): the
    schema must say so; a document without one must at least hold a decomposition."""
    doc = load_json_doc(path_or_doc, what, err)
    schema = doc.get("schema")
    label = path_or_doc if not isinstance(path_or_doc, dict) else f"the {what}"
    if schema is None and not ({"decomposition", "run"} & set(doc)) or \
            schema is not None and not str(schema).startswith("nvstage.run/"):
        raise err(f"{label} is not a {what}: schema {schema!r}, expected 'nvstage.run/1'",
                  hint="write one with nvstage run WORKLOAD --profile --json FILE")
    return doc


def load_trace_doc(path, what: str = "Chrome trace", err: ErrorFactory = ArtifactError) -> dict:
    """A Chrome trace: ``{"traceEvents": [...]}`` (what ``nvstage run --trace`` writes) or the
    bare event array, returned in the object form."""
    text = read_text_doc(path, what, err)
    doc = parse_json_text(text, f"{path} is not a {what}", err)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise err(f"{path} is not a {what}: no traceEvents list",
                  hint="write one with nvstage run WORKLOAD --trace FILE")
    return doc
