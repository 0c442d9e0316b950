"""The runs of the study entries that span its data sets (`MethodEntry.spans_data`), planned
after the cells of each seed and model, whose runs they build on:

- `combine:` one run per data set that trains nothing: it combines the adapters the method it
  names trained on every data set (the cell's seed, model, size and scale), each source named
  after its data set, and scores its data set with that data set's head (causal LMs trained
  on generative data share the base's LM head: none is named);
- `across_data:` a fusion per data set (and learning rate) over those adapters, trained on the
  data set: AdapterFusion's setting, the target's own adapter among those fused;
- `multi_task:` one run (per learning rate) trained on every data set together (its first as
  the spec's `data`, the others as `multi_task`), then one run per data set scoring its adapter
  there, training nothing.

The runs an entry builds on keep their folders under their data set's name (`folder_name`),
so a fusion calls each fused adapter by its data set. The data sets these entries span are
all classification data or all data of one generative task (`sft`, `chat`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adaptlab.data.identity import joint_digest
from adaptlab.engine.adapters import as_adapter_name
from adaptlab.errors import ConfigError
from adaptlab.records.combining import CombineRecipe, SourceFolder
from adaptlab.records.config import TrainConfig
from adaptlab.records.multi_task import TaskData
from adaptlab.records.scale import Scale
from adaptlab.records.spec import RunSpec
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.grid import entry_run_spec, trainings
from adaptlab.study.planned_run import PlannedRun, run_id, source_folder
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_generative import generative_task
from adaptlab.study.spec_methods import MethodEntry
from adaptlab.study.spec_scale import scale_label

DataSet = tuple[str, Mapping[str, Any]]
"""A data set of the grid: its source and reading options."""


class SpanningPlan:
    """Plans the spanning entries of `spec` over its `data` (none: it plans nothing and
    changes nothing); `digest` hashes a data source."""

    def __init__(
        self,
        spec: StudySpec,
        data: Sequence[DataSet],
        digest: Callable[[str], str | None],
    ) -> None:
        self.spec, self.data, self.digest = spec, data, digest
        self.entries = [entry for entry in spec.methods if entry.spans_data]
        self.names = data_names(spec) if self.entries else []
        if self.entries:
            _check_one_kind(spec, self.entries[0], data)
        self.built_on = {ref for entry in self.entries for ref in entry.adapters or ()}
        self.adapters: dict[tuple[int, str, int | None, Scale, str], PlannedRun] = {}
        """(data set, model, size, scale, label) -> the run whose adapter entries build on."""

    def folder_name(self, entry: MethodEntry, index: int) -> str:
        """The name of the folder of `entry`'s run on data set `index`: the data set's for a
        method the spanning entries build on, else the method's label."""
        label = entry.display_label
        return self.names[index] if label in self.built_on else label

    def built(self, index: int, cell: Mapping[str, Sequence[PlannedRun]]) -> None:
        """Note the runs of `cell` (on data set `index`) that spanning entries build on."""
        for label in self.built_on:
            (run,) = cell[label]  # one learning rate: checked when the spec is read
            spec = run.spec
            self.adapters[(index, spec.model, spec.train_size, spec.scale, label)] = run

    def runs(
        self, seed: int, model: str, size: int | None, scale: Scale, analysis: AnalysisRequest
    ) -> list[PlannedRun]:
        """The spanning runs of one seed, model, size and scale: multi-task training first,
        then per data set each entry's runs, in the spec's order."""
        trained = {
            entry.display_label: [
                self._multi_task(entry, model, size, scale, train, analysis)
                for train in trainings(self.spec, entry, seed)
            ]
            for entry in self.entries
            if entry.multi_task
        }
        runs = [run for planned in trained.values() for run in planned]
        for index in range(len(self.data)):
            for entry in self.entries:
                if entry.combine is not None:
                    runs.append(self._combination(entry, index, model, size, scale))
                elif entry.across_data:
                    runs += self._fusions(entry, index, model, size, scale, seed, analysis)
                else:
                    runs += [
                        self._scoring(entry, index, run) for run in trained[entry.display_label]
                    ]
        return runs

    def _combination(
        self, entry: MethodEntry, index: int, model: str, size: int | None, scale: Scale
    ) -> PlannedRun:
        """The run combining the adapters `entry` names and scoring data set `index`."""
        options = entry.combine
        assert options is not None  # a combine entry
        built = self._built_on(entry, model, size, scale)
        weights = options.weights_for(len(built))
        generative = generative_task(self.data[index][1].get("task")) is not None
        recipe = CombineRecipe(
            how=options.how,
            sources=tuple(
                SourceFolder(name, source_folder(run), weight)
                for name, run, weight in zip(self.names, built, weights, strict=True)
            ),
            head=None if generative else self.names[index],
            density=options.density,
            rank=options.rank,
            majority_sign=options.majority_sign,
            seed=options.seed,
        )
        return self._untrained(entry, index, built[index], built, combine=recipe)

    def _scoring(self, entry: MethodEntry, index: int, trained: PlannedRun) -> PlannedRun:
        """The run scoring the multi-task run `trained`'s adapter on data set `index`."""
        adapter = source_folder(trained)
        return self._untrained(entry, index, trained, [trained], multi_task_adapter=adapter)

    def _untrained(
        self,
        entry: MethodEntry,
        index: int,
        trained: PlannedRun,
        needs: Sequence[PlannedRun],
        **scores: Any,
    ) -> PlannedRun:
        """A run of `entry` on data set `index` that scores adapters trained as `trained` was,
        building on the runs `needs`."""
        source, options = self.data[index]
        spec = trained.spec
        run_spec = RunSpec(
            spec.model,
            source,
            (),
            train_size=spec.train_size,
            train=_resolved(spec),
            data_options=dict(options),
            device=self.spec.device,
            scale=spec.scale,
            test_size=self.spec.test_size,
            **scores,
        )
        return self._planned(entry, run_spec, AnalysisRequest(), needs, self.digest(source))

    def _fusions(
        self,
        entry: MethodEntry,
        index: int,
        model: str,
        size: int | None,
        scale: Scale,
        seed: int,
        analysis: AnalysisRequest,
    ) -> list[PlannedRun]:
        """A fusion per learning rate over the adapters `entry` names, on data set `index`."""
        built = self._built_on(entry, model, size, scale)
        source, options = self.data[index]
        return [
            self._planned(
                entry,
                entry_run_spec(
                    self.spec,
                    entry,
                    (model, source, options),
                    size,
                    scale,
                    train,
                    fuse=tuple(source_folder(run) for run in built),
                ),
                analysis,
                built,
                self.digest(source),
            )
            for train in trainings(self.spec, entry, seed)
        ]

    def _multi_task(
        self,
        entry: MethodEntry,
        model: str,
        size: int | None,
        scale: Scale,
        train: TrainConfig,
        analysis: AnalysisRequest,
    ) -> PlannedRun:
        """The run training `entry`'s method on every data set together."""
        (first, options), rest = self.data[0], self.data[1:]
        run_spec = entry_run_spec(
            self.spec,
            entry,
            (model, first, options),
            size,
            scale,
            train,
            multi_task=tuple(TaskData(source, dict(more)) for source, more in rest),
        )
        digest = joint_digest([self.digest(source) for source, _ in self.data])
        return self._planned(entry, run_spec, analysis, (), digest)

    def _planned(
        self,
        entry: MethodEntry,
        run_spec: RunSpec,
        analysis: AnalysisRequest,
        needs: Sequence[PlannedRun],
        digest: str | None,
    ) -> PlannedRun:
        label = entry.display_label
        return PlannedRun(
            run_id(run_spec),
            self.spec.name,
            label + scale_label(self.spec.scale_axes, run_spec.scale),
            run_spec,
            analysis,
            needs=tuple(run.run_id for run in needs),
            data_digest=digest,
            adapter_label=label,
        )

    def _built_on(
        self, entry: MethodEntry, model: str, size: int | None, scale: Scale
    ) -> list[PlannedRun]:
        """The runs, one per data set, of the method `entry` builds on."""
        assert entry.adapters is not None and len(entry.adapters) == 1  # checked by the spec
        label = entry.adapters[0]
        return [self.adapters[(i, model, size, scale, label)] for i in range(len(self.data))]


def data_names(spec: StudySpec) -> list[str]:
    """The name each data set of `spec` gives the adapters trained on it, in a combination (its
    head) and in a fusion: the file's or built-in's name, made an adapter name."""
    names = [as_adapter_name(Path(entry.source).stem) for entry in spec.data]
    for index, name in enumerate(names):
        if name in names[:index]:
            first = spec.data[names.index(name)].source
            raise ConfigError(
                f"study {spec.name}: data sets {first} and {spec.data[index].source} would both "
                f"name their adapters {name!r} in a combination or fusion; rename one file"
            )
    return names


def _check_one_kind(spec: StudySpec, entry: MethodEntry, data: Sequence[DataSet]) -> None:
    """The data sets `entry` spans (every one of the study) are all classification data or
    all of one generative task; one line naming the first two that are not."""
    tasks = [generative_task(options.get("task")) for _, options in data]
    kinds = ["classification" if task is None else f"{task.name} data" for task in tasks]
    for index, kind in enumerate(kinds):
        if kind != kinds[0]:
            first, other = spec.data[0].source, spec.data[index].source
            raise ConfigError(
                f"study {spec.name}: method {entry.display_label} spans every data set of the "
                f"study, which must be all classification or all of one generative task: "
                f"{first} is {kinds[0]}, {other} is {kind}"
            )


def _resolved(spec: RunSpec) -> TrainConfig:
    """`spec`'s training with its learning rate resolved (a default one made explicit)."""
    return replace(spec.train, learning_rate=spec.learning_rate())
