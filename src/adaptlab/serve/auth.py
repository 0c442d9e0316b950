"""The server's key: which requests may pass, and where a server may listen without one.

With a key set, every route but `/health` wants `Authorization: Bearer <key>` (what the
`openai` client sends for its `api_key`), compared in constant time. A server listening on
any address but loopback must have a key, unless told in so many words that it may serve
anyone who reaches it (`--insecure-no-key`).
"""

from __future__ import annotations

import hmac
import ipaddress

from adaptlab.errors import ConfigError

API_KEY_ENV = "ADAPTLAB_API_KEY"
"""The environment variable `adaptlab serve` reads its key from when `--api-key` is not given."""

OPEN_PATHS = frozenset(["/health"])
"""What anyone may ask without the key: whether the server is up."""


def check_key(key: str | None, source: str = "--api-key") -> str | None:
    """`key` if it can be sent in an HTTP header (visible ASCII, no spaces); None stays None."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise ConfigError(f"{source} must be a string, got {type(key).__name__}")
    if not key:
        raise ConfigError(f"{source} is empty: give a key, or leave it out on a loopback host")
    if not all("!" <= char <= "~" for char in key):
        raise ConfigError(
            f"{source} must be visible ASCII characters without spaces, so that an HTTP "
            "header can carry it"
        )
    return key


def is_loopback(host: str) -> bool:
    """Whether `host` reaches this machine alone: `localhost` or a loopback address
    (127.0.0.0/8, ::1). Any other name may resolve to an address others reach."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listening(host: str, key: str | None, insecure_no_key: bool) -> None:
    """Refuse a server that others could reach without a key, unless `insecure_no_key`."""
    if key is not None and insecure_no_key:
        raise ConfigError(
            f"--insecure-no-key and a key (--api-key or {API_KEY_ENV}) contradict each other: "
            "drop one"
        )
    if key is None and not insecure_no_key and not is_loopback(host):
        raise ConfigError(
            f"--host {host} opens the server to the network without a key: give --api-key KEY "
            f"(or set {API_KEY_ENV}), or --insecure-no-key to serve anyone who can reach it"
        )


def authorized(header: bytes, key: bytes) -> bool:
    """Whether an `Authorization` header carries `Bearer <key>` (in constant time)."""
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), key)
