"""HTML report of a study: tables and plots from result records (never trains).

`write_report(records, out, title=..., validations=...)` is what `adaptlab study report` calls.
"""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.report.write import is_report, render_report, write_report

__all__ = ["write_report", "render_report", "is_report"]

lazy_face(__name__)
