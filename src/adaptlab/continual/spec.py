"""What defines a sequence: one model, ordered stages (data entries), a method, a strategy,
and what the stages train for (classification, causal language modelling of their text, or
answers to prompts and chats)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from adaptlab.checks import shown
from adaptlab.continual.objectives import (
    DEFAULT_OBJECTIVE,
    check_objective_name,
    get_objective,
    is_default_objective,
)
from adaptlab.continual.registry import check_objective, strategy_config
from adaptlab.continual.strategy import StrategyConfig
from adaptlab.errors import ConfigError
from adaptlab.methods.compose import MethodSpec, check_combination, resolve
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import make_config
from adaptlab.records.config import TrainConfig
from adaptlab.records.jsonfields import JsonObject
from adaptlab.records.scale import Scale, resolve_auto
from adaptlab.records.spec_fields import (
    check_training_fields,
    method_records,
    read_method_records,
    read_shared_fields,
)


@dataclass(frozen=True)
class SequenceSpec:
    """A model trained through `stages` in order with `methods` and `strategy`.

    `train_size` samples that many training examples per stage (and as many dev examples, as
    `adaptlab train` does); `test_size` caps each stage's test set (a stratified, seeded
    sample), since every stage is tested after every stage. With `single_stage`, each stage
    after the first is also trained alone, for forward transfer. `stage_options`, when given,
    holds each stage's reading options (`load_dataset` keywords: `label_column`, ...; for sft
    and chat stages, the generative data options of `adaptlab train`: `prompt_column`,
    `chat_template`, `max_new_tokens`, ...), each a text, a number, a flag or a list of texts.

    `objective`: what the stages train for, an objective's name (`objectives`).
    "classification" (the default): task-incremental, one head per labelled stage, scored by
    accuracy. "causal-lm": lifelong pretraining, each stage a corpus of documents (`load_texts`
    sources: a built-in's texts, a .txt file, a text column), the model a causal LM trained on
    next-token prediction, scored by each corpus's held-out perplexity; `train_size` and
    `test_size` then count documents. "sft" and "chat": each stage prompt -> completion pairs
    or chats read as `adaptlab train --task sft|chat` reads them, the causal LM trained on the
    answers' tokens and scored by their perplexity on each stage's test examples.

    `device` "auto" and the `scale`'s precision "auto" are resolved on creation, as in
    `RunSpec`; the scale is written only when it is not the float32 default.
    """

    model: str
    stages: tuple[str, ...]
    methods: tuple[MethodConfig, ...]
    strategy: StrategyConfig
    train_size: int | None = None
    test_size: int | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    device: str = "auto"
    single_stage: bool = False
    stage_options: tuple[Mapping[str, Any], ...] = ()
    objective: str = DEFAULT_OBJECTIVE
    scale: Scale = Scale()

    def __post_init__(self) -> None:
        device, scale = resolve_auto(self.device, self.scale)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "scale", scale)
        check_objective_name(self.objective)
        check_objective(self.strategy.name, self.objective)
        if not self.stages or not all(isinstance(s, str) and s for s in self.stages):
            raise ConfigError("a sequence needs at least one stage (a data set name or file)")
        if self.stage_options and len(self.stage_options) != len(self.stages):
            raise ConfigError(
                f"stage options: expected one mapping per stage ({len(self.stages)}), "
                f"got {len(self.stage_options)}"
            )
        check_combination(self.methods)
        if self.methods[0].name == "fusion":
            raise ConfigError("a sequence trains adapters; fusion is not one of its methods")
        check_training_fields(
            self.methods, self.scale, train_size=self.train_size, test_size=self.test_size
        )

    @classmethod
    def build(
        cls,
        model: str,
        stages: Sequence[str],
        method: MethodSpec | Sequence[MethodSpec] = "houlsby",
        strategy: str = "sequential",
        strategy_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> SequenceSpec:
        """A spec from names as users write them (`"lora"`, `"replay"`, {"rate": 0.05})."""
        config = strategy_config(strategy, strategy_options)
        objective = settings.get("objective", DEFAULT_OBJECTIVE)
        check_objective_name(objective)
        generates = get_objective(objective).generation_options
        return cls(
            model, tuple(stages), resolve(method, {}, generates=generates), config, **settings
        )

    @property
    def metric(self) -> str:
        """What the matrix holds, as the objective says (accuracy, perplexity)."""
        return get_objective(self.objective).metric

    def options_of(self, stage: int) -> dict[str, Any]:
        """Stage `stage`'s reading options (none given: {})."""
        return dict(self.stage_options[stage]) if self.stage_options else {}

    def learning_rate(self) -> float:
        """The given learning rate, or the lowest default of the methods (as `RunSpec`)."""
        generates = get_objective(self.objective).generation_options
        return self.train.learning_rate_for(self.methods, generates=generates)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the learning rate resolved."""
        return {
            "model": self.model,
            "stages": list(self.stages),
            "methods": method_records(self.methods),
            "strategy": {"name": self.strategy.name, "config": self.strategy.to_dict()},
            "train_size": self.train_size,
            "test_size": self.test_size,
            "train": {**self.train.to_dict(), "learning_rate": self.learning_rate()},
            "device": self.device,
            "single_stage": self.single_stage,
            **(
                {"stage_options": [dict(o) for o in self.stage_options]}
                if self.stage_options
                else {}
            ),
            **({} if is_default_objective(self.objective) else {"objective": self.objective}),
            **({} if self.scale.is_default else {"scale": self.scale.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sequence spec") -> SequenceSpec:
        """The spec `to_dict` wrote, validated again; ConfigError naming a bad field."""
        return cls.from_json(JsonObject(data, where))

    @classmethod
    def from_json(cls, spec: JsonObject) -> SequenceSpec:
        """`from_dict` of an object being read as part of a larger record."""
        spec.refuse_unknown([f.name for f in fields(cls)])
        parts = read_method_records(spec)
        strategy = spec.object("strategy")
        with spec.naming():
            methods = tuple(make_config(name, options) for name, options in parts)
            config = strategy_config(strategy.text("name"), strategy.mapping("config"))
        return cls(
            **read_shared_fields(spec),
            stages=spec.texts("stages"),
            methods=methods,
            strategy=config,
            test_size=spec.optional_integer("test_size"),
            single_stage=spec.boolean("single_stage", False),
            stage_options=tuple(
                _stage_options(item) for item in spec.objects("stage_options", default=[])
            ),
            objective=spec.text("objective", default=DEFAULT_OBJECTIVE),
        )


def _stage_options(item: JsonObject) -> dict[str, Any]:
    """A stage's reading options as stored: each a text, a number, a flag or a list of texts;
    one line naming the first that is none of these."""
    for key, value in item.data.items():
        scalar = isinstance(value, str | int | float | bool)
        if not scalar and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ConfigError(
                f"{item.where}: {item.prefix}{key}: expected a text, a number, a flag or a list "
                f"of texts, got {shown(value)}"
            )
    return {str(key): value for key, value in item.data.items()}
