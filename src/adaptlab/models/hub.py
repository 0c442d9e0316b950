"""Decide in seconds whether the Hugging Face hub can be used, so offline machines fail fast."""

import os
import socket
import urllib.request
from urllib.parse import urlsplit

from huggingface_hub import constants

PROBE_TIMEOUT_S = 3.0


def hub_usable() -> bool:
    """False in offline mode (HF_HUB_OFFLINE, read now) or when the hub cannot be reached."""
    offline_vars = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    if constants.is_offline_mode() or any(_env_true(name) for name in offline_vars):
        return False
    return hub_reachable()


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub opens within `timeout` s; behind a proxy, assume yes."""
    if urllib.request.getproxies().get("https"):
        return True
    url = urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _env_true(name: str) -> bool:
    """Whether environment variable `name` is set to a true value (as huggingface_hub reads it)."""
    return os.environ.get(name, "").upper() in {"1", "ON", "YES", "TRUE"}
