"""Small HTML building blocks. Every piece of text passes through `esc` here, so no caller
can forget to escape a method label or a data set name; `Html` marks markup already built."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence


class Html(str):
    """A string that is already markup: `esc` passes it through unchanged."""


def esc(text: object) -> Html:
    """Escaped text (markup passes unchanged)."""
    return text if isinstance(text, Html) else Html(html.escape(str(text), quote=True))


def join(parts: Iterable[Html]) -> Html:
    return Html("\n".join(parts))


def tag(name: str, content: object = "", **attrs: object) -> Html:
    """`<name attrs>content</name>`; attribute names may end in `_` (class_ -> class)."""
    rendered = "".join(f' {k.rstrip("_")}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    return Html(f"<{name}{rendered}>{esc(content)}</{name}>")


def section(ident: str, title: str, *body: Html) -> Html:
    return tag("section", join([tag("h2", title), *body]), id=ident)


def note(text: str) -> Html:
    """A one-line note that stands in for a section or plot whose data is absent."""
    return tag("p", text, class_="note")


def figure(uri: str, alt: str, caption: str | None = None) -> Html:
    """An embedded image (a data URI) with alt text and an optional caption."""
    img = Html(f'<img src="{esc(uri)}" alt="{esc(alt)}">')
    parts = [img] if caption is None else [img, tag("figcaption", caption)]
    return tag("figure", join(parts))


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], row_classes: Sequence[str] = ()
) -> Html:
    """A table; cells are escaped unless they are `Html`."""
    head = tag("tr", join(tag("th", h) for h in headers))
    body = [
        tag(
            "tr",
            join(tag("td", cell) for cell in row),
            class_=row_classes[i] if i < len(row_classes) and row_classes[i] else None,
        )
        for i, row in enumerate(rows)
    ]
    return tag("table", join([tag("thead", head), tag("tbody", join(body))]))
