"""The whole HTML document: head with inline CSS, the sections in reading order, the footer."""

from __future__ import annotations

from collections.abc import Sequence

import adaptlab.report.combining as combining
import adaptlab.report.continual as continual
import adaptlab.report.crosslingual as crosslingual
import adaptlab.report.fusion as fusion
import adaptlab.report.generative as generative
import adaptlab.report.harness as harness
import adaptlab.report.preference as preference
import adaptlab.report.sections as sections
import adaptlab.report.temporal as temporal
from adaptlab.report.learning_forgetting import learning_forgetting
from adaptlab.report.markup import Html, join, tag
from adaptlab.report.per_class import per_class
from adaptlab.report.style import CSS
from adaptlab.report.view import StudyView
from adaptlab.study.store_rows import StoredSequence

GENERATOR = '<meta name="generator" content="adaptlab">'
"""Marks a file as an adaptlab report, which a later report may replace."""


def render(view: StudyView, title: str, sequences: Sequence[StoredSequence] = ()) -> str:
    """The report page: self-contained (no script, no external CSS, font or image)."""
    runs, settings = len(view.runs), len(view.settings)
    lead = (
        f"{runs} run{'s' if runs != 1 else ''} of {len(view.methods)} method"
        f"{'s' if len(view.methods) != 1 else ''} in {settings} setting"
        f"{'s' if settings != 1 else ''} (data set × training size"
        f"{' × model' if view.with_model else ''})."
    )
    body = join(
        [
            tag("h1", title),
            sections.judged_by(view),
            tag("p", lead, class_="lead"),
            sections.what_to_use(view),
            sections.results(view),
            per_class(view),
            sections.efficiency(view),
            sections.training_size(view),
            sections.learning_rate(view),
            sections.overfitting(view),
            generative.generative(view),
            preference.preference(view),
            harness.harness(view),
            learning_forgetting(view),
            sections.analysis(view),
            fusion.fusion(view),
            combining.combining(view),
            crosslingual.crosslingual(view),
            temporal.temporal(view),
            sections.transferability(view),
            continual.continual(sequences),
            sections.footer(view, title),
        ]
    )
    return _document(title, body)


def render_sequences(sequences: Sequence[StoredSequence], title: str) -> str:
    """The report page of a store holding sequences only."""
    count = len(sequences)
    lead = f"{count} sequence{'s' if count != 1 else ''} of stages trained in order."
    body = join(
        [
            tag("h1", title),
            tag("p", lead, class_="lead"),
            continual.continual(sequences),
            continual.footer(sequences, title),
        ]
    )
    return _document(title, body)


def _document(title: str, body: Html) -> str:
    head = join(
        [
            Html('<meta charset="utf-8">'),
            Html(GENERATOR),
            Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            tag("title", title),
            Html(f"<style>{CSS}</style>"),
        ]
    )
    document = join([Html("<head>"), head, Html("</head>"), Html("<body>"), tag("main", body)])
    return f'<!DOCTYPE html>\n<html lang="en">\n{document}\n</body>\n</html>\n'
