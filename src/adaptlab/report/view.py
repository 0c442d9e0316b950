"""Everything the report's sections show about a study, computed once from its runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import adaptlab.report.aggregate as aggregate
import adaptlab.report.classes as classes
from adaptlab.report.aggregate import Cell, MeanCurve
from adaptlab.report.classes import ClassTable, Imbalance
from adaptlab.report.judging import Judgement, judge
from adaptlab.report.recommend import Verdict, verdict
from adaptlab.report.records import Curve, Run, SavedValidation, Setting
from adaptlab.tasks.registry import get_task
from adaptlab.tasks.task import Task

T = TypeVar("T")


@dataclass(frozen=True)
class StudyView:
    """The runs, the metric judging each data set, their cells (per setting, method, learning
    rate), and derived numbers."""

    runs: tuple[Run, ...]
    judged: Mapping[str, Judgement]  # per data set name
    settings: tuple[Setting, ...]
    methods: tuple[str, ...]
    cells: tuple[Cell, ...]
    chosen: tuple[Cell, ...]  # per (setting, method): the learning rate chosen on dev
    validations: tuple[SavedValidation, ...] = ()  # from `adaptlab rank --validate`, if run

    @property
    def with_model(self) -> bool:
        """Whether setting labels must name the model (the study compares models)."""
        return len({s.model for s in self.settings}) > 1

    def cells_in(self, setting: Setting) -> list[Cell]:
        return [c for c in self.cells if c.setting == setting]

    def chosen_in(self, setting: Setting) -> list[Cell]:
        return [c for c in self.chosen if c.setting == setting]

    def verdict(self, setting: Setting) -> Verdict:
        return verdict(self.chosen_in(setting))

    def is_chosen(self, cell: Cell) -> bool:
        return any(c is cell for c in self.chosen)

    def rates_in(self, setting: Setting) -> list[float | None]:
        return list(dict.fromkeys(c.learning_rate for c in self.cells_in(setting)))

    def rates_of(self, setting: Setting, method: str) -> list[float | None]:
        return [c.learning_rate for c in self.cells_in(setting) if c.method == method]

    def robustness(self, setting: Setting, method: str) -> float | None:
        return aggregate.robustness([c for c in self.cells_in(setting) if c.method == method])

    def data_lines(self) -> list[tuple[str, str]]:
        """(model, data) pairs in setting order: the units of the training-size plot."""
        return list(dict.fromkeys((s.model, s.data) for s in self.settings))

    def settings_of(self, kind: type[Task]) -> list[Setting]:
        """The settings whose data set's task is a `kind` (generative, preference...)."""
        return [s for s in self.settings if isinstance(get_task(self.judged[s.data].task), kind)]

    def sizes_of(self, model: str, data: str) -> list[Setting]:
        return [s for s in self.settings if (s.model, s.data) == (model, data)]

    def largest(self) -> list[Setting]:
        """Per (model, data set): the setting with the most training examples."""
        return [self.sizes_of(model, data)[-1] for model, data in self.data_lines()]

    def curves(self, setting: Setting) -> dict[str, MeanCurve]:
        """Mean dev curve (loss and judging metric) per method at its chosen learning rate."""
        metric = self.judged[setting.data].metric
        return self._per_method(setting, lambda runs: aggregate.mean_curve(runs, metric))

    def class_table(self, setting: Setting) -> ClassTable | None:
        """Per-class results of each method's best run at its chosen learning rate."""
        return classes.class_table(self.chosen_in(setting), self.runs)

    def imbalance(self, setting: Setting) -> Imbalance | None:
        """The class distribution of the setting's training sample."""
        return classes.imbalance(classes.runs_of_setting(self.runs, setting))

    def chosen_runs(self, setting: Setting) -> dict[str, list[Run]]:
        """Each method's runs (seeds) at its chosen learning rate, those with a finite test
        score."""
        return self._per_method(setting, lambda runs: list(runs) or None)

    def _per_method(
        self, setting: Setting, summarise: Callable[[Sequence[Run]], T | None]
    ) -> dict[str, T]:
        """`summarise` of each method's runs at its chosen learning rate, where it gives one."""
        found: dict[str, T] = {}
        for cell in self.chosen_in(setting):
            value = summarise(aggregate.runs_of(self.runs, cell))
            if value is not None:
                found[cell.method] = value
        return found

    @property
    def measures(self) -> list[str]:
        """Similarity measures (rsa, cka) some run recorded, in first-seen order."""
        return list(dict.fromkeys(m for r in self.runs for m, _ in r.layer_scores))

    @property
    def has_landscapes(self) -> bool:
        return any(r.landscape is not None for r in self.runs)

    def layer_curves(self, setting: Setting, measure: str) -> dict[str, tuple[float, ...]]:
        """Mean per-layer `measure` per method at its chosen learning rate (if recorded)."""
        return self._per_method(setting, lambda runs: aggregate.mean_layer_scores(runs, measure))

    def fusion_weights(self, setting: Setting) -> dict[str, dict[str, tuple[float, ...]]]:
        """Per fusion method at its chosen learning rate: each adapter's mean weight per layer."""
        return self._per_method(setting, aggregate.mean_fusion_weights)

    def landscapes(self, setting: Setting) -> dict[str, Curve]:
        """Mean loss landscape per method at its chosen learning rate (if recorded)."""
        return self._per_method(setting, aggregate.mean_landscape)


def study_view(
    runs: Sequence[Run], validations: Sequence[SavedValidation] = (), metric: str | None = None
) -> StudyView:
    """Judge, group and choose once; sections only read the result. `metric` overrides the
    metric of every data set."""
    judged = judge(runs, metric)
    cells = aggregate.group_cells(runs, judged)
    return StudyView(
        runs=tuple(runs),
        judged=judged,
        settings=tuple(aggregate.settings(runs)),
        methods=tuple(dict.fromkeys(r.method for r in runs)),
        cells=tuple(cells),
        chosen=tuple(aggregate.chosen(cells)),
        validations=tuple(validations),
    )
