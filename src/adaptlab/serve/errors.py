"""A request the server refuses: the HTTP status and one line naming the problem."""

from __future__ import annotations

from adaptlab.errors import AdaptlabError


class RequestError(AdaptlabError):
    """A bad request (4xx): unknown adapter, bad name, empty or oversized input."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_unicode(text: str, where: str) -> None:
    """Refuse (400) text that is not valid Unicode: an unpaired surrogate, which JSON lets
    through as an escape ("\\ud800") and which no tokenizer or UTF-8 answer can take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(
            400,
            f"{where} holds an unpaired surrogate ({text[error.start]!r} at character "
            f"{error.start}): send valid Unicode text",
        ) from None
