"""Reading the JSON and TOML documents a user hands nvstage, with one clear error each.

A path that is missing, a folder, unreadable, not text, not JSON/TOML, or not a table ends in
one message that names the file and what it was meant to be; callers choose the error class
(its exit code) and add their own schema checks on the dict they get back.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path

from .errors import ArtifactError, InputNotFound, NvstageError

ErrorFactory = Callable[..., NvstageError]  # (message, hint=...) -> the error to raise


def read_text_doc(path: str | os.PathLike, what: str, err: ErrorFactory = ArtifactError) -> str:
    """The text of ``path``, a ``what``: InputNotFound when it is missing, ``err`` when it
    is a folder, unreadable or not UTF-8 text (a binary file given by mistake)."""
    p = Path(path)
    if p.is_dir():
        raise err(f"{p} is a folder, not a {what}", hint=f"give the path of the {what} itself")
    if not p.is_file():
        raise InputNotFound(f"no such {what} file: {p}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise err(f"{p} is not a {what}: not text (a binary file?)") from None
    except OSError as e:
        raise err(f"cannot read the {what} {p}: {e.strerror}") from None


def load_json_doc(path_or_doc, what: str, err: ErrorFactory = ArtifactError) -> dict:
    """A JSON object from a file (or a dict, returned as it is)."""
    if isinstance(path_or_doc, dict):
        return path_or_doc
    text = read_text_doc(path_or_doc, what, err)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise err(f"{path_or_doc} is not a {what}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise err(f"{path_or_doc} is not a {what}: a JSON {type(doc).__name__}, not an object")
    return doc


def load_toml_doc(path: str | os.PathLike, what: str, err: ErrorFactory = ArtifactError) -> dict:
    """A TOML document from a file."""
    text = read_text_doc(path, what, err)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise err(f"{path} is not valid TOML: {e}") from None


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
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise err(f"{path} is not a {what}: not JSON ({e})") from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise err(f"{path} is not a {what}: no traceEvents list",
                  hint="write one with nvstage run WORKLOAD --trace FILE")
    return doc
