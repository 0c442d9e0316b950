"""Silence transformers' chatter (load reports, newly initialised heads) for one call."""

from collections.abc import Iterator
from contextlib import contextmanager

from transformers.utils import logging as hf_logging


@contextmanager
def quiet_transformers(progress: bool = False) -> Iterator[None]:
    """Show only transformers' errors, and its progress bars only if `progress`; restore after."""
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
