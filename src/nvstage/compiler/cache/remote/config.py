"""The remote tiers the environment configures, made once per process for the same settings.

Trust. With signatures (``signing.py``) a reader that trusts public keys (given, or its own
signing key's) requires a signature by one of them: an unsigned entry, one signed by another
key, or one for another key is rejected (a miss, counted). Without keys, a tier is trusted as
far as its hashes go: anyone who can write to the server can then write entries. A read-only
tier (``|read-only=true`` or ``NVSTAGE_REMOTE_READ_ONLY=1``: pull requests from forks) writes
nothing; a reader that requires signatures and holds no signing key writes nothing either (its
entries would be rejected by everyone like it). A tier found down is skipped by the next
commands of a build for ``NVSTAGE_REMOTE_BACKOFF`` seconds (60; ``tiers.py``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from nvstage.compiler.cache.remote import named
from nvstage.compiler.cache.remote.spec import (_ENV, DEFAULT_BACKOFF_S, ENV_BACKOFF, ENV_READ_ONLY,
                                                ENV_REQUIRE_SIGNATURE, ENV_SIGNING_KEY,
                                                ENV_VERIFY_KEY, parse_specs)
from nvstage.compiler.cache.remote.tier import RemoteTier, notice
from nvstage.errors import RemoteCacheError

def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class Config:
    tiers: list[RemoteTier]
    problems: list[str]  # settings that could not be used (each said once)
    signing: str  # how entries are signed and checked, in words


_configs: dict[tuple, Config] = {}
_config_lock = threading.Lock()


def configured(environ=None) -> Config | None:
    """The remote tiers the environment names (None when it names none), made once per
    process for the same settings. Problems are collected, never raised: a tier that cannot
    be used is left out (or made read-only), and the build goes on."""
    environ = os.environ if environ is None else environ
    value = named(environ)
    if not value:
        return None
    ident = tuple(environ.get(k) for k in _ENV)
    with _config_lock:
        got = _configs.get(ident)
        if got is None:
            got = _configs[ident] = configure(value, environ)
            for line in got.problems:
                notice(line)
        return got


def configure(value: str, environ) -> Config:
    from nvstage.compiler.cache.remote import signing

    problems: list[str] = []
    try:
        specs = parse_specs(value, environ)
    except RemoteCacheError as e:
        return Config([], [f"{e.message}: building without the remote cache"], "")
    signer = verifier = None
    read_only = _truthy(environ.get(ENV_READ_ONLY))
    why_read_only = f"{ENV_READ_ONLY}" if read_only else None
    require = _truthy(environ.get(ENV_REQUIRE_SIGNATURE))
    if environ.get(ENV_VERIFY_KEY, "").strip():
        require = True
        try:
            verifier = signing.Verifier.from_text(environ[ENV_VERIFY_KEY])
        except RemoteCacheError as e:
            return Config([], [f"{ENV_VERIFY_KEY}: {e.message}: building without the remote "
                               f"cache (signatures are required, and cannot be checked)"], "")
    key_path = environ.get(ENV_SIGNING_KEY, "").strip()
    if key_path:
        try:
            signer = signing.Signer.from_file(key_path)
            if verifier is None:
                verifier = signing.Verifier([signer.public])
            else:
                verifier.add(signer.public)
            require = True
        except RemoteCacheError as e:
            problems.append(f"{ENV_SIGNING_KEY}: {e.message}: nothing is written to the "
                            f"remote cache")
            read_only, why_read_only = True, "no usable signing key"
    if require and verifier is None:
        return Config([], [f"{ENV_REQUIRE_SIGNATURE} is set and no public key is given "
                           f"({ENV_VERIFY_KEY}): building without the remote cache"], "")
    if require and signer is None and not read_only:
        read_only, why_read_only = True, "signatures required, no signing key"
    trusted = f"{len(verifier.keys)} trusted key{'s' if len(verifier.keys) > 1 else ''}" \
        if verifier is not None else ""
    if signer is not None:
        how = f"writes signed, reads require signatures: {trusted}"
    elif require:
        how = f"reads require signatures: {trusted}"
    else:
        how = "unsigned: the server is trusted"
    tiers = [RemoteTier(spec, signer=signer, verifier=verifier, require=require,
                        read_only=read_only, why_read_only=why_read_only) for spec in specs]
    return Config(tiers, problems, how)


def reset() -> None:
    """Forget the tiers made so far (tests; a long-running process whose servers changed)."""
    with _config_lock:
        for config in _configs.values():
            for tier in config.tiers:
                tier.close()
        _configs.clear()


def backoff_seconds(environ=None) -> float:
    environ = os.environ if environ is None else environ
    try:
        return max(0.0, float(environ.get(ENV_BACKOFF, DEFAULT_BACKOFF_S)))
    except ValueError:
        return DEFAULT_BACKOFF_S
