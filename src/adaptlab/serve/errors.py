"""A request the server refuses: the HTTP status and one line naming the problem."""

from __future__ import annotations

from adaptlab.errors import AdaptlabError


class RequestError(AdaptlabError):
    """A bad request (4xx): unknown adapter, bad name, empty or oversized input."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
