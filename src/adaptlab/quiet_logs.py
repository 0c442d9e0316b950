"""Holding back a library's warnings where adaptlab knows they are about what is meant."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def errors_only(logger: str) -> Iterator[None]:
    """Only errors from `logger` and the loggers below it while the block runs."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
