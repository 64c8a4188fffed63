"""Where the remote tiers are: ``NVSTAGE_REMOTE_CACHE`` (the environment only, never a file a
pull request controls), one or more specs separated by blanks, each a URL with ccache-style
``|name=value`` attributes::

    redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]      (rediss:// for TLS)
    http(s)://[USER:PASSWORD@]HOST[:PORT][/PATH]    |layout=subdirs (default), flat or bazel
    ...|connect-timeout=MS|operation-timeout=MS|read-only=true

``connect-timeout`` (1000) bounds opening a connection; ``operation-timeout`` (5000) bounds one
operation (a GET, an MGET, a PUT) from its first byte sent to its last byte read.

Credentials may instead come from ``NVSTAGE_REMOTE_USER``/``NVSTAGE_REMOTE_PASSWORD`` (HTTP
basic authentication, Redis AUTH) and ``NVSTAGE_REMOTE_TOKEN`` (HTTP bearer). They are never
part of a tier's label, and every message about a tier is masked (``Spec.mask``). The other
variables (read-only, signing, backoff) are ``config.py``'s.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field

from nvstage.compiler.cache.remote import ENV_REMOTE
from nvstage.errors import RemoteCacheError

ENV_USER = "NVSTAGE_REMOTE_USER"  # a server's credentials
ENV_PASSWORD = "NVSTAGE_REMOTE_PASSWORD"
ENV_TOKEN = "NVSTAGE_REMOTE_TOKEN"
ENV_READ_ONLY = "NVSTAGE_REMOTE_READ_ONLY"
ENV_SIGNING_KEY = "NVSTAGE_REMOTE_SIGNING_KEY"
ENV_VERIFY_KEY = "NVSTAGE_REMOTE_VERIFY_KEY"
ENV_REQUIRE_SIGNATURE = "NVSTAGE_REMOTE_REQUIRE_SIGNATURE"
ENV_BACKOFF = "NVSTAGE_REMOTE_BACKOFF"
DEFAULT_BACKOFF_S = 60.0
# Every variable that decides the tiers: a change makes new tiers (tests, long processes).
_ENV = (ENV_REMOTE, ENV_USER, ENV_PASSWORD, ENV_TOKEN, ENV_READ_ONLY, ENV_SIGNING_KEY,
        ENV_VERIFY_KEY, ENV_REQUIRE_SIGNATURE)

DEFAULT_CONNECT_S = 1.0
DEFAULT_OPERATION_S = 5.0
LAYOUTS = ("subdirs", "flat", "bazel")
_ATTRS = ("layout", "connect-timeout", "operation-timeout", "read-only", "key-prefix")


@dataclass
class Spec:
    """One remote tier as configured."""

    scheme: str  # redis, rediss, http, https
    host: str
    port: int
    path: str  # HTTP: the URL's path, no trailing slash; Redis: the database number
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # a traceback never shows them
    token: str | None = field(default=None, repr=False)
    layout: str = "subdirs"
    connect_s: float = DEFAULT_CONNECT_S
    operation_s: float = DEFAULT_OPERATION_S
    read_only: bool = False
    prefix: str = "nvstage"
    secrets: list[str] = field(default_factory=list, repr=False)

    @property
    def kind(self) -> str:
        return "redis" if self.scheme.startswith("redis") else "http"

    @property
    def label(self) -> str:
        """The tier as messages, ``nvstage cache`` and manifests name it: no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        where = f"{self.scheme}://{host}:{self.port}"
        if self.kind == "redis":
            return f"{where}/{self.path}"
        return f"{where}{self.path}" + (f"|layout={self.layout}"
                                        if self.layout != "subdirs" else "")

    def mask(self, text: str) -> str:
        """``text`` with every credential replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
                quoted = urllib.parse.quote(secret, safe="")
                if quoted != secret:
                    text = text.replace(quoted, "***")
        return text


def parse_specs(value: str, environ=os.environ) -> list[Spec]:
    """The tiers ``NVSTAGE_REMOTE_CACHE`` names. Raises ``RemoteCacheError`` (masked)."""
    specs = []
    for word in value.split():
        specs.append(parse_spec(word, environ))
    return specs


def parse_spec(word: str, environ=os.environ) -> Spec:
    url, *attrs = word.split("|")
    secrets = [s for s in (environ.get(ENV_PASSWORD), environ.get(ENV_TOKEN)) if s]
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise RemoteCacheError(_masked(f"{ENV_REMOTE}: not a URL: {url}", url)) from None
    if parts.password:
        secrets.append(urllib.parse.unquote(parts.password))
        secrets.append(parts.password)
    shown = _strip_userinfo(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "http", "https"):
        raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: nvstage speaks redis://, rediss://, "
                               f"http:// and https://")
    if not parts.hostname:
        raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: no host")
    user = urllib.parse.unquote(parts.username) if parts.username else environ.get(ENV_USER)
    password = urllib.parse.unquote(parts.password) if parts.password is not None else \
        environ.get(ENV_PASSWORD)
    if scheme.startswith("redis"):
        db = parts.path.strip("/") or "0"
        if not db.isdigit():
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: the path names a Redis database "
                                   f"by its number (/0)")
        spec = Spec(scheme, parts.hostname, port or 6379, db, user or None, password or None)
    else:
        spec = Spec(scheme, parts.hostname, port or (443 if scheme == "https" else 80),
                    parts.path.rstrip("/"), user or None, password or None,
                    environ.get(ENV_TOKEN) or None)
    spec.secrets = secrets
    for attr in attrs:
        name, _, val = attr.partition("=")
        name = name.strip()
        if name not in _ATTRS:
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: unknown attribute {name!r} "
                                   f"(known: {', '.join(_ATTRS)})")
        try:
            if name == "layout":
                if val not in LAYOUTS:
                    raise ValueError(f"layout is one of {', '.join(LAYOUTS)}")
                if spec.kind != "http":
                    raise ValueError("layout is for http(s):// tiers")
                spec.layout = val
            elif name in ("connect-timeout", "operation-timeout"):
                ms = int(val)
                if not 1 <= ms <= 600_000:
                    raise ValueError("give milliseconds, 1 to 600000")
                setattr(spec, "connect_s" if name == "connect-timeout" else "operation_s",
                        ms / 1000)
            elif name == "read-only":
                if val not in ("true", "false"):
                    raise ValueError("read-only is true or false")
                spec.read_only = val == "true"
            elif name == "key-prefix":
                if not val or any(c.isspace() for c in val):
                    raise ValueError("a key prefix is a word")
                spec.prefix = val
        except ValueError as e:
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: {name}={val!r}: {e}") from None
    return spec


def _strip_userinfo(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "(a URL)"


def _masked(text: str, url: str) -> str:
    return text.replace(url, _strip_userinfo(url))
