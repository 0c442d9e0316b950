"""The report's per-class section: per data set, the class distribution of the training sample
and each method's best run class by class, so a model that ignores the small classes shows.
"""

from __future__ import annotations

import adaptlab.report.formatting as fmt
from adaptlab.report.classes import RARE_BELOW, ClassTable, Imbalance
from adaptlab.report.markup import Html, note, section, table, tag
from adaptlab.report.view import StudyView
from adaptlab.tasks.registry import get_task

NEVER = "∅"


def per_class(view: StudyView) -> Html:
    """Per (model, data set) at its largest training size: the imbalance note and the table;
    data sets whose task has no classes (regression, generative tasks) are left out, and the
    section with them when none has."""
    parts: list[Html] = []
    for setting in view.largest():
        unit = get_task(view.judged[setting.data].task).class_unit
        if unit is None:
            continue
        label = setting.label(view.with_model)
        parts.append(tag("h3", label))
        found = view.imbalance(setting)
        if found is not None:
            parts.append(tag("p", imbalance_note(found, unit), class_="imbalance"))
        classes = view.class_table(setting)
        if classes is None:
            parts.append(note(f"{label}: the runs recorded no per-class test counts."))
            continue
        parts += _table(classes)
    if not parts:
        return Html("")
    lead = (
        "Precision, recall and F1 of each class on the test split for the best run of each "
        "method (the seed with the best dev score in the metric that judges the data set, at "
        "the method's chosen learning rate), at the largest training size; classes by test "
        f"support. {NEVER} marks a class no method ever predicts."
    )
    return section("per-class", "Per class", tag("p", lead, class_="lead"), *parts)


def imbalance_note(found: Imbalance, units: str) -> str:
    """`Training sample (seed 0, the same for every seed): 1,000 examples in 8 classes;
    largest earn 517 (51.7%), smallest grain 8 (0.8%), ratio 64.6x; ...`."""
    seeds = "the same for every seed" if found.same_for_every_seed else "other seeds' differ"
    parts = [
        f"Training sample (seed {found.seed}, {seeds}): {found.total:,} {units} in "
        f"{len(found.counts)} classes"
    ]
    spread = found.spread
    if spread is not None and found.total:
        big, small = spread.largest_count, spread.smallest_count
        ratio = "infinite" if small == 0 else f"{spread.ratio:.1f}x"
        parts.append(
            f"largest {spread.largest} {big:,} ({100 * big / found.total:.1f}%), smallest "
            f"{spread.smallest} {small:,} ({100 * small / found.total:.1f}%), ratio {ratio}"
        )
    parts.append(
        f"{_count(len(found.rare), 'class', 'classes')} with fewer than {RARE_BELOW} training "
        f"{units}{_names(found.rare)}"
    )
    if found.unseen is not None:
        unseen = _count(len(found.unseen), "test class", "test classes")
        parts.append(f"{unseen} never seen in training{_names(found.unseen)}")
    return "; ".join(parts) + "."


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _names(names: tuple[str, ...]) -> str:
    return f" ({', '.join(names)})" if names else ""


def _table(classes: ClassTable) -> list[Html]:
    headers = ["class", "test support", "train examples"]
    for method in classes.methods:
        headers += [f"{method} P", f"{method} R", f"{method} F1"]
    rows = []
    for row in classes.rows:
        cells: list[object] = [
            row.label + (f"\u00a0{NEVER}" if row.never_predicted else ""),
            f"{row.support:,}",
            "n/a" if row.train is None else f"{row.train:,}",
        ]
        for counts in row.counts:
            if counts is None:
                cells += ["n/a"] * 3
            else:
                cells += [fmt.score(counts.precision), fmt.score(counts.recall)]
                cells.append(fmt.score(counts.f1))
        rows.append(cells)
    marks = ["never" if row.never_predicted else "" for row in classes.rows]
    never = [row.label for row in classes.rows if row.never_predicted]
    parts = [tag("div", table(headers, rows, marks), class_="wide")]
    if never:
        parts.append(
            note(
                f"{len(never)} of {len(classes.rows)} classes {'is' if len(never) == 1 else 'are'} "
                f"never predicted by any method's best run: {', '.join(never)}."
            )
        )
    return parts
