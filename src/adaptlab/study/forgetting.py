"""Forgetting a study asks for of each model it trains (`adaptlab.forgetting`):

    forgetting: {probes: [text:fairy-tales, facts:countries], limit: 100}

`ForgettingOptions` is the spec's key, checked as the spec loads (every run trains a causal LM,
every probe is `kind:value` of a known kind). `ForgettingRequest` is what each run's analysis
is handed: after training, each probe is scored on the trained model and on its base (the base's
scores kept per base model, so a study scores each base once), and the run's own test split is
scored the same way, its negated forgetting being what the run learnt. The results join the
run's record under `analysis` as `forgetting`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, PositiveInt, field_validator

from adaptlab.errors import ConfigError
from adaptlab.forgetting.options import DEFAULT_LIMIT, DEFAULT_WINDOW, ProbeOptions
from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_fields import StrictModel, refuse_repeats
from adaptlab.tasks.registry import task_names

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from adaptlab.engine.packing import Encoded
    from adaptlab.forgetting.paired import ItemScores
    from adaptlab.forgetting.probe import Probe

TARGET = "target"
"""How the result names the run's own test split, scored as a probe."""


class ForgettingOptions(StrictModel):
    """The spec's `forgetting:` key: the probes (`kind:value`; none: the built-in ones), the
    most items each scores, the seed of their samples, tokens per text window, and a folder of
    lm-eval task files for `harness:` probes (read from the spec's folder)."""

    probes: list[Annotated[str, Field(min_length=3)]] = []
    limit: PositiveInt = DEFAULT_LIMIT
    seed: Annotated[int, Field(ge=0)] = 0
    window: Annotated[int, Field(ge=2)] = DEFAULT_WINDOW
    include: Annotated[str, Field(min_length=1)] | None = None

    @field_validator("probes")
    @classmethod
    def _probes(cls, values: list[str]) -> list[str]:
        from adaptlab.forgetting.probes import split

        refuse_repeats(values)
        try:
            for value in values:
                split(value)
        except ConfigError as error:
            raise ValueError(str(error)) from None
        return values

    def request(self, base: Path) -> ForgettingRequest:
        """What each run is handed, files and the task folder read from `base` (the spec's
        folder)."""
        from adaptlab.forgetting.probes import default_probes

        include = None if self.include is None else (base / self.include).resolve()
        options = ProbeOptions(self.limit, self.seed, self.window, include)
        probes = tuple(_from_folder(name, base) for name in self.probes or default_probes())
        return ForgettingRequest(probes, options)


def _from_folder(name: str, base: Path) -> str:
    """`kind:value` with a value that names a file beside the spec made absolute."""
    kind, _, value = name.partition(":")
    beside = base / Path(value).expanduser()
    return f"{kind}:{beside.resolve()}" if beside.is_file() else name


def check_forgetting(data: Sequence[DataEntry]) -> None:
    """Refuse (ValueError, one line) data whose runs train no causal LM: probes score next-token
    predictions."""
    causal = task_names(lambda task: task.model_kind == "causal_lm")
    for entry in data:
        if entry.options.task not in causal:
            raise ValueError(
                f"forgetting: scores causal LMs, and data {entry.source} trains "
                f"{entry.options.task or 'a labelled task'}; give it task: "
                f"{' / '.join(causal)}, or drop forgetting:"
            )


@dataclass(frozen=True)
class ForgettingRequest:
    """The probes each trained model is scored on and how they are built; in this process,
    the probes built so far (their items read once per base model and task) and the base
    models' scores (by `base_key`, then probe)."""

    probes: tuple[str, ...]
    options: ProbeOptions
    built: dict[str, list[Probe]] = field(default_factory=dict, compare=False, repr=False)
    base_scores: dict[str, dict[str, ItemScores]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def measure(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        base_model: str,
        run_task: str,
        test: Sequence[Encoded],
    ) -> dict[str, Any]:
        """The forgetting of trained `model` on every probe, and on its own `test` split."""
        from adaptlab.forgetting.loss_probe import LossProbe
        from adaptlab.forgetting.measure import measure_forgetting
        from adaptlab.forgetting.probes import build_probes

        options = replace(self.options, run_task=run_task)
        built_for = f"{base_model}|{run_task}"
        if built_for not in self.built:
            self.built[built_for] = build_probes(self.probes, tokenizer, options)
        probes = self.built[built_for]
        target = LossProbe(TARGET, list(test)[: options.limit], options.batch_size)
        cache = self.base_scores.setdefault(base_key(model, base_model, run_task), {})
        found = measure_forgetting(model, tokenizer, probes, base_scores=cache)
        (learnt,) = measure_forgetting(model, tokenizer, [target])  # each run's own test split
        return {"probes": [r.to_dict() for r in found], TARGET: learnt.to_dict()}


def base_key(model: nn.Module, base_model: str, run_task: str) -> str:
    """What makes two runs' bases score alike: the base model, the task a data probe encodes
    for, its linear layers' kinds (a quantised base has bitsandbytes' own), its weights' dtype
    and the autocast the analysis runs under (the run's precision)."""
    import torch

    layers = {
        type(m).__name__
        for m in model.modules()
        if type(m).__module__.startswith(("torch.nn", "bitsandbytes"))
        and "Linear" in type(m).__name__
    }
    dtype = next(model.parameters()).dtype  # the embeddings: the base's own
    autocast = [
        str(torch.get_autocast_dtype(d)) for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)
    ]
    return "|".join([base_model, run_task, *sorted(layers), str(dtype), *autocast])
