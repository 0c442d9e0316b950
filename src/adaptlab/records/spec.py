"""What defines one training run: model, data, validated method configs (or the fusion it
trains over adapters) and training settings.

A run's id (`adaptlab.study.planner.run_id`) hashes `RunSpec.to_dict()`, so that dict is a
stored contract: the seven fields below always write exactly what they wrote in adaptlab 0.1.0,
and a field added later writes itself only when it differs from its default. Adding a field
with a default therefore keeps the id of every existing run, and a results store keeps
resuming. A fusion run's `fusion` is written in `methods`, as the run's one method.
`device` and the scale's precision "auto" are resolved when the spec is made (on the machine
that makes it), so a record names what the run used, and float32 CPU runs keep their ids.

A run that trains nothing (`combine`: trained adapters combined; `multi_task_adapter`: a
multi-task run's adapter) has no methods; its `train` is the training of the adapters it
scores, learning rate included, and its scoring reads `max_length`, `eval_batch_size` and the
seed that cut `train_size`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.compose import MethodSpec, check_combination, fusion_in, resolve
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.configs.fusion import FusionConfig
from adaptlab.methods.registry import make_config
from adaptlab.records.combining import CombineRecipe
from adaptlab.records.config import TrainConfig
from adaptlab.records.jsonfields import JsonObject
from adaptlab.records.multi_task import TaskData, check_union
from adaptlab.records.scale import Scale, resolve_auto
from adaptlab.records.spec_fields import (
    check_training_fields,
    method_records,
    read_method_records,
    read_shared_fields,
)
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.tasks.registry import get_task, known_task

_CORE = ("model", "data", "methods", "train_size", "train", "data_options", "device")
"""The fields every spec writes, in this order (adaptlab 0.1.0's form)."""
_WRITTEN_AS_METHOD = ("fusion",)
"""Fields a record writes as the run's method (a fusion run names `fusion` in `methods`)."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines a run. `methods` are validated configs: `RunSpec.build` takes a
    method as users write it (`"houlsby"`, `"lora+bitfit"`, `{"lora": {"rank": 4}}`, a list).
    A fusion run has no methods: its `fusion` trains over the adapters of `fuse`."""

    model: str
    data: str
    methods: tuple[MethodConfig, ...]
    train_size: int | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "auto"
    """cpu, cuda, cuda:N, mps, or "auto" (the best this machine has), resolved on creation."""
    scale: Scale = Scale()
    """Precision ("auto" resolved on creation), base dtype or quantisation, checkpointing,
    offloading; written when not the float32 default (the commands' default is "auto")."""
    fuse: tuple[str, ...] = ()
    """Adapter (or run) folders that a fusion run fuses."""
    fusion: FusionConfig | None = None
    """The fusion layers a fusion run trains over `fuse` (instead of methods)."""
    stack: tuple[str, ...] = ()
    """Adapter (or run) folders that run, frozen, below the adapter this run trains."""
    zero_shot: tuple[ZeroShotTarget, ...] = ()
    """Data sets whose test split the trained run is also scored on, labels matched by name."""
    multi_task: tuple[TaskData, ...] = ()
    """Data sets trained together with `data` in one multi-task run (`records.multi_task`)."""
    combine: CombineRecipe | None = None
    """Trained adapters this run combines, without training, and scores `data` with."""
    multi_task_adapter: str | None = None
    """The folder of a multi-task run's adapter this run scores `data` with, without training."""
    test_size: int | None = None
    """The test split capped to this many examples (stratified by label, the run's seed; pairs
    and chats sampled with it); None: the whole test split. Labelled tasks, pairs and chats."""

    def __post_init__(self) -> None:
        device, scale = resolve_auto(self.device, self.scale)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "scale", scale)
        if not isinstance(self.methods, tuple) or not all(
            isinstance(config, MethodConfig) for config in self.methods
        ):
            raise ConfigError(
                f"RunSpec.methods must be a tuple of method configs, got {self.methods!r}; "
                "RunSpec.build takes method names such as 'lora+bitfit'"
            )
        for name in ("fuse", "stack"):
            folders = getattr(self, name)
            if not isinstance(folders, tuple) or not all(isinstance(f, str) and f for f in folders):
                raise ConfigError(f"RunSpec.{name} must be a tuple of folders, got {folders!r}")
        if self.trains_nothing:
            self._check_untrained()
        elif self.fusion is None:
            check_combination(self.methods)
        elif not isinstance(self.fusion, FusionConfig) or self.methods:
            raise ConfigError(
                f"RunSpec.fusion must be a FusionConfig, in a spec without methods; got "
                f"{self.fusion!r} beside {len(self.methods)} method(s)"
            )
        fusion = self.fusion is not None
        if fusion and not self.fuse:
            raise ConfigError("a fusion run needs the adapters to fuse (--adapters RUN,RUN,...)")
        if self.fuse and not fusion:
            raise ConfigError("adapters to fuse (--adapters) need --method fusion")
        if fusion and self.stack:
            raise ConfigError("a fusion run trains over the adapters it fuses; drop --stack")
        if not all(isinstance(t, ZeroShotTarget) for t in self.zero_shot):
            raise ConfigError(
                f"RunSpec.zero_shot must hold ZeroShotTargets, got {self.zero_shot!r}"
            )
        if self.zero_shot and self.task is not None and not get_task(self.task).labelled:
            raise ConfigError(f"zero-shot targets score a labelled task; task {self.task} has none")
        if any(t.stack_swap for t in self.zero_shot) and not self.stack:
            raise ConfigError("a zero-shot stack swap needs a run stacked on adapters (stack)")
        if self.multi_task and (fusion or self.stack or self.zero_shot):
            raise ConfigError(
                "a multi-task run trains one new adapter on its data sets; it takes no fusion, "
                "stack or zero-shot targets"
            )
        if not all(isinstance(task, TaskData) for task in self.multi_task):
            raise ConfigError(f"RunSpec.multi_task must hold TaskData, got {self.multi_task!r}")
        if self.multi_task:
            others = [(task.data, task.data_options) for task in self.multi_task]
            check_union([(self.data, self.data_options), *others])
        if self.test_size is not None and self.task is not None and not _has_test(self.task):
            raise ConfigError(
                f"test-size caps the test split of a labelled task or of prompt -> completion "
                f"pairs and chats; task {self.task} has none"
            )
        check_training_fields(
            self.trained_configs, self.scale, train_size=self.train_size, test_size=self.test_size
        )

    def _check_untrained(self) -> None:
        """A run that trains nothing scores one adapter it is given, on a float32 base."""
        if self.combine is not None and self.multi_task_adapter is not None:
            raise ConfigError("a run scores a combination or a multi-task adapter, not both")
        if self.combine is not None and not isinstance(self.combine, CombineRecipe):
            raise ConfigError(f"RunSpec.combine must be a CombineRecipe, got {self.combine!r}")
        adapter = self.multi_task_adapter
        if adapter is not None and (not isinstance(adapter, str) or not adapter):
            raise ConfigError(f"RunSpec.multi_task_adapter must be a folder, got {adapter!r}")
        given = [
            name
            for name in ("methods", "fuse", "stack", "zero_shot", "multi_task")
            if getattr(self, name)
        ]
        if self.fusion is not None or given:
            raise ConfigError(
                f"a run that scores a combination or a multi-task adapter trains nothing; it "
                f"takes no {(given or ['fusion'])[0]}"
            )
        if self.train.learning_rate is None:
            raise ConfigError(
                "a run that trains nothing records the learning rate of the adapters it scores"
            )
        if self.scale.frozen_base is not None:
            raise ConfigError(
                "a run that scores a combination or a multi-task adapter loads a float32 base; "
                f"it cannot score on a {self.scale.frozen_base} one"
            )

    @classmethod
    def build(
        cls,
        model: str,
        data: str,
        method: MethodSpec | Sequence[MethodSpec] = "houlsby",
        **settings: Any,
    ) -> RunSpec:
        """A spec whose method is given as users write it; `settings` are the other fields.

        `fusion` (alone, with its options) is the spec's `fusion`, trained over `fuse`.
        """
        fusion = fusion_in(method)
        if fusion is not None:
            return cls(model, data, (), fusion=fusion, **settings)
        task = settings.get("data_options", {}).get("task")
        generates = known_task(task) and get_task(task).generates
        return cls(model, data, resolve(method, {}, generates=generates), **settings)

    @property
    def task(self) -> str | None:
        """The task its data options name (None: the data's labels decide)."""
        task = self.data_options.get("task")
        return None if task is None else str(task)

    @property
    def trains_nothing(self) -> bool:
        """Whether the run scores adapters it is given (a combination, a multi-task adapter)
        without training."""
        return self.combine is not None or self.multi_task_adapter is not None

    @property
    def trained_configs(self) -> tuple[MethodConfig, ...]:
        """What the run trains, as its record writes it: its methods, or its fusion."""
        return self.methods if self.fusion is None else (self.fusion,)

    def learning_rate(self) -> float:
        """The given learning rate, or the lowest default of what the run trains (App. A.2),
        for its task (a task that generates text has its own defaults, which a preference task
        scales by its `learning_rate_factor`)."""
        task = None if self.task is None else get_task(self.task)
        rate = self.train.learning_rate_for(
            self.trained_configs, generates=task is not None and task.generates
        )
        if self.train.learning_rate is None and task is not None:
            rate = float(f"{rate * task.learning_rate_factor:.12g}")  # 1e-6, not 1.0...02e-6
        return rate

    def to_dict(self) -> dict[str, Any]:
        """The fully resolved spec, JSON-ready (the learning rate resolved too)."""
        spec: dict[str, Any] = {
            "model": self.model,
            "data": self.data,
            "methods": method_records(self.trained_configs),
            "train_size": self.train_size,
            "train": {**self.train.to_dict(), "learning_rate": self.learning_rate()},
            "data_options": dict(self.data_options),
            "device": self.device,
        }
        for added in fields(self):
            value = getattr(self, added.name)
            if added.name not in (*_CORE, *_WRITTEN_AS_METHOD) and value != _default(added):
                spec[added.name] = _plain(value)
        return spec

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "run spec") -> RunSpec:
        """The spec `to_dict` wrote (a store row, metrics.json), validated again.

        Raises ConfigError naming the field that is missing or of the wrong type.
        """
        return cls.from_json(JsonObject(data, where))

    @classmethod
    def from_json(cls, spec: JsonObject) -> RunSpec:
        """`from_dict` of an object being read as part of a larger record."""
        added = ("scale", "fuse", "stack", "zero_shot", "multi_task", "combine")
        spec.refuse_unknown((*_CORE, *added, "multi_task_adapter", "test_size"))
        parts = read_method_records(spec)
        with spec.naming("methods"):
            fusion = fusion_in([{name: options} for name, options in parts])
            if fusion is not None:
                parts = []  # a fusion run's one "method" is its fusion
            methods = tuple(make_config(name, options) for name, options in parts)
        return cls(
            **read_shared_fields(spec),
            data=spec.text("data"),
            methods=methods,
            fusion=fusion,
            data_options=dict(spec.mapping("data_options", default={})),
            fuse=spec.texts("fuse", default=()),
            stack=spec.texts("stack", default=()),
            zero_shot=tuple(
                ZeroShotTarget.from_json(target) for target in spec.objects("zero_shot", default=[])
            ),
            multi_task=tuple(
                TaskData.from_json(task) for task in spec.objects("multi_task", default=[])
            ),
            combine=CombineRecipe.from_json(spec.object("combine")) if "combine" in spec else None,
            multi_task_adapter=spec.optional_text("multi_task_adapter"),
            test_size=spec.optional_integer("test_size"),
        )


def _has_test(task: str) -> bool:
    """Whether `task` reads examples whose test split a run can cap: labels, or pairs and
    chats (a generative task with a `data_shape`; documents are not capped)."""
    found = get_task(task)
    return found.labelled or getattr(found, "data_shape", None) is not None


def _default(spec_field: Field[Any]) -> Any:
    if spec_field.default is not MISSING:
        return spec_field.default
    if spec_field.default_factory is not MISSING:
        return spec_field.default_factory()
    return MISSING


def _plain(value: Any) -> Any:
    """A field's value as JSON: `to_dict()` of records, lists for tuples."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value
