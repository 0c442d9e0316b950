"""Combine trained adapters into one without training: task arithmetic, TIES, DARE, SVD.

The sources (`adaptlab.methods.combine_sources`) load onto their base model, and a new adapter
of the same methods is filled from them, module by module, in the model's module order:

- LoRA and DoRA: the pairs (A, B) of each layer by `combine_math.combine_lora`, as PEFT's
  `add_weighted_adapter` combines them (the result runs with scaling 1: alpha = rank): `linear`
  (PEFT's `cat`) stacks the pairs, exactly the weighted sum of the updates, whose rank is the
  sum of the sources'; `peft_linear` (PEFT's `linear`) and the non-svd pruning hows merge A and
  B apart; the `_svd` variants re-factorise the merged updates. DoRA's magnitudes combine as
  deltas from the base weight's row norms, where every DoRA magnitude starts.
- Other inserted modules (bottleneck adapters, (IA)3, prefixes): parameter by parameter with
  the merge rule (`combine_math.combine_deltas`): `linear` is the weighted sum, the weighted
  average of the `adapters` library when the weights sum to 1. TIES, DARE and magnitude
  pruning work on each source's change from a start all sources share: (IA)3's scales start at
  1 (`SiteModule.common_start`); modules that start from seeded random weights have no such
  start and take `linear` only.
- Copies of pretrained weights (BitFit's biases, LNFit's norms, full fine-tuning's weights):
  deltas from the base model's values.
- Heads: sources trained on the same labels share one head, the average of the heads of the
  sources with a positive weight, weighted by them (a head starts from random weights, so it
  has no deltas to combine; a negated source gives none). Sources with different labels keep
  their heads, by source name (`adaptlab.methods.combined_heads`), and loading picks one.
  Causal-LM adapters share the base's LM head.

The combined folder is an adapter folder like any other (it loads, evaluates, serves and
exports as one); its manifest records the sources (names, tensor checksums, weights, tasks) and
the combination (`combined`). Nothing is written unless the whole combination succeeds.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from adaptlab.backbone.roles import ROLES
from adaptlab.errors import ConfigError
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.methods.adapt import add_adapter, get_handle
from adaptlab.methods.adapter_kind import adapter_kind
from adaptlab.methods.adapter_loading import load_adapter, source_head
from adaptlab.methods.combination import Combination
from adaptlab.methods.combine_math import combine_deltas, combine_lora, result_rank
from adaptlab.methods.combine_sources import Source, read_sources, shares_head
from adaptlab.methods.combined_heads import write_heads
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA
from adaptlab.methods.manifest_combined import Combined, CombinedSource
from adaptlab.methods.persistence import save_adapter
from adaptlab.methods.site import SiteModule
from adaptlab.methods.sliced import units
from adaptlab.methods.state import get_state
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import trusted_base
from adaptlab.paths import check_new_folder

DEFAULT_NAME = "combined"


def combine_adapters(
    adapters: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    weights: Sequence[float] | None = None,
    how: str = "linear",
    density: float | None = None,
    rank: int | None = None,
    majority_sign: str = "total",
    seed: int = 0,
    names: Sequence[str] | None = None,
    name: str = DEFAULT_NAME,
    model: str | None = None,
) -> Path:
    """Combine the adapters saved in `adapters` (adapter or run folders) into the new adapter
    folder `out`, and return it.

    `adapters`: at least two different folders. `weights`: one per adapter, negative to
    subtract a behaviour (default: equal weights summing to 1, an average). `how`: linear (the
    weighted sum of the updates), peft_linear (PEFT's linear, LoRA only), cat, svd, ties,
    ties_svd, dare_linear, dare_ties, dare_linear_svd, dare_ties_svd, magnitude_prune or
    magnitude_prune_svd (`adaptlab.methods.combination`);
    `density`: the fraction TIES, DARE and magnitude pruning keep; `rank`: the LoRA rank of the
    `_svd` variants (default: the largest source rank); `majority_sign`: TIES's sign election
    (total or frequency); `seed`: DARE's masks. `names`: the sources' names (default: their run
    folders' names), which keep their heads when their labels differ. `model`: the base model,
    when the manifests name a local folder (their paths are not followed on their own).

    Example::

        adaptlab.combine_adapters(["runs/rt", "runs/tweets"], "runs/sentiment", how="ties",
                                  weights=[0.6, 0.4], density=0.5)
    """
    out = Path(out)
    weights = list(weights) if weights is not None else [1 / len(adapters)] * len(adapters)
    sources = read_sources(adapters, weights, names)
    check_new_folder(out, "combined adapter folder", [(s.folder, "adapter") for s in sources])
    combination = Combination(
        how=how,
        weights=tuple(weights),
        density=density,
        rank=rank,
        majority_sign=majority_sign,
        seed=seed,
    )
    if name in {s.name for s in sources}:
        raise ConfigError(f"a source is named {name!r}; give the combined adapter another name")
    base = _base_model(sources, model, seed)
    staging = staging_folder(out)
    try:
        _combine(base, sources, combination, name, staging)
        publish_folder(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out


def _base_model(sources: Sequence[Source], model: str | None, seed: int) -> nn.Module:
    """The sources' base model, with a head for the first source's labels."""
    for source in sources:
        if source.manifest.task is None:
            raise ConfigError(
                f"{source.folder}: the manifest names no task; combine adapters saved by "
                "adaptlab runs"
            )
    first = sources[0]
    base_id = model or trusted_base(first.folder, first.manifest.base_model.id)
    kind = adapter_kind(first.manifest)  # the head its task's runs load
    if kind is None:
        raise ConfigError(
            f"{first.folder}: its base is a {first.manifest.base_model.model_class}, whose head "
            "adaptlab cannot load"
        )
    return load_model(base_id, kind, label_names=first.manifest.label_names, seed=seed).model


def _combine(
    model: nn.Module, sources: Sequence[Source], combination: Combination, name: str, out: Path
) -> None:
    """Load the sources onto `model`, fill the combined adapter from them and save it to `out`."""
    shared = shares_head(sources)
    for source in sources:
        load_adapter(model, source.folder, name=source.name, activate=False, with_head=shared)
    handles = [get_handle(model, s.name) for s in sources]
    first = sources[0].manifest
    configs = _combined_configs(sources, combination)
    combined = add_adapter(
        model,
        name,
        configs,
        backbone=first.backbone_overrides,
        train_head=shared,
        seed=combination.seed,
    )
    generator = torch.Generator().manual_seed(combination.seed)
    with torch.no_grad():
        _fill_modules(model, combined, handles, combination, generator)
        _fill_owned(model, combined, handles, combination, generator)
    heads = None
    if first.train_head and not shared:
        heads = write_heads(
            out,
            {s.name: source_head(model, s.folder) for s in sources},
            {s.name: str(s.manifest.task) for s in sources},
            {s.name: s.labels for s in sources},
        )
    tasks = {s.manifest.task for s in sources}
    combined.training_scale = first.scale if len({s.manifest.scale for s in sources}) == 1 else None
    save_adapter(
        model,
        out,
        name=name,
        base_model_id=first.base_model.id,
        task=tasks.pop() if len(tasks) == 1 else None,
        label_names=sources[0].labels if shared else (),
        chat_template=first.chat_template,
        combined=Combined(
            combination=combination.to_dict(),
            sources=tuple(
                CombinedSource(
                    name=s.name,
                    sha256=s.manifest.tensors.sha256,
                    weight=s.weight,
                    task=s.manifest.task,
                    label_names=s.labels,
                )
                for s in sources
            ),
        ),
        heads=heads,
    )


def _combined_configs(
    sources: Sequence[Source], combination: Combination
) -> tuple[MethodConfig, ...]:
    """The first source's configs, LoRA's with the combined rank (alpha = rank: scaling 1, as
    the pairs are combined to run) and every source's target layers."""
    configs = []
    for index, config in enumerate(sources[0].manifest.configs):
        if isinstance(config, LoRAConfig):
            loras = [s.manifest.configs[index] for s in sources]
            assert all(isinstance(c, LoRAConfig) for c in loras)  # checked by read_sources
            rank = result_rank([c.rank for c in loras], combination)  # type: ignore[attr-defined]
            targets = {t for c in loras for t in c.targets}  # type: ignore[attr-defined]
            config = dataclasses.replace(
                config,
                rank=rank,
                alpha=float(rank),
                targets=tuple(role for role in ROLES if role in targets),
            )
        elif combination.lora_only:
            raise ConfigError(
                f"--how {combination.how} combines LoRA pairs only; {config.name} combines with "
                "linear, ties, dare_linear, dare_ties or magnitude_prune"
            )
        configs.append(config)
    return tuple(configs)


def _fill_modules(
    model: nn.Module,
    combined: AdaptHandle,
    handles: Sequence[AdaptHandle],
    combination: Combination,
    generator: torch.Generator,
) -> None:
    """Fill each inserted module of `combined` from the sources' modules at its site, in the
    model's module order (the order PEFT draws DARE's masks in)."""
    order = {module_name: i for i, (module_name, _) in enumerate(model.named_modules())}
    found = [{(site, method): m for site, method, m in h.modules()} for h in handles]
    for site, method, module in sorted(combined.modules(), key=lambda item: order[item[0]]):
        for part, unit in units(module).items():  # a fused layer's parts one by one
            present = [
                i for i, modules in enumerate(found) if part in units(modules.get((site, method)))
            ]
            sources = [units(found[i][(site, method)])[part] for i in present]
            if isinstance(unit, LoRA):
                _fill_lora(unit, sources, present, combination, generator)
            else:
                assert isinstance(unit, SiteModule)
                _fill_parameters(method, unit, sources, present, combination, generator)


def _fill_lora(
    module: LoRA,
    sources: Sequence[nn.Module],
    present: Sequence[int],
    combination: Combination,
    generator: torch.Generator,
) -> None:
    loras = [m for m in sources if isinstance(m, LoRA)]
    pairs = [(m.A.detach(), m.B.detach(), m.scaling) for m in loras]
    rank = module.A.shape[0]  # over all sources: stacking pads a layer some lack
    a, b = combine_lora(pairs, combination, generator, sources=present, rank=rank)
    module.A.copy_(a)
    module.B.copy_(b)
    if module.magnitude is not None:
        magnitudes = [m.magnitude.detach() for m in loras if m.magnitude is not None]
        start = module.magnitude.detach().clone()  # the base's row norms, every DoRA's start
        rule = dataclasses.replace(combination, how=_merge_rule(combination), rank=None)
        module.magnitude.copy_(
            combine_deltas(magnitudes, rule, generator, base=start, sources=present)
        )


def _merge_rule(combination: Combination) -> str:
    """The how that merges DoRA's magnitudes: the rule of `combination` (linear for cat, which
    only stacks LoRA pairs)."""
    return "linear" if combination.rule == "cat" else combination.rule


def _fill_parameters(
    method: str,
    module: SiteModule,
    sources: Sequence[nn.Module],
    present: Sequence[int],
    combination: Combination,
    generator: torch.Generator,
) -> None:
    start = type(module).common_start
    if start is None and combination.rule != "linear":
        raise ConfigError(
            f"--how {combination.how} combines each adapter's change from a common start; "
            f"{method} starts from seeded random weights: combine it with --how linear"
        )
    for parameter_name, parameter in module.named_parameters():
        tensors = [dict(m.named_parameters())[parameter_name].detach() for m in sources]
        base = torch.full_like(parameter, start) if start is not None else None
        parameter.copy_(combine_deltas(tensors, combination, generator, base=base, sources=present))


def _fill_owned(
    model: nn.Module,
    combined: AdaptHandle,
    handles: Sequence[AdaptHandle],
    combination: Combination,
    generator: torch.Generator,
) -> None:
    """Copies of pretrained weights as deltas from the base's; a shared head as the average of
    the heads of the positively weighted sources."""
    state = get_state(model)
    assert state is not None  # the sources are loaded
    head = set(combined.groups.get(HEAD_GROUP, ()))
    for tensor_name, parameter in combined.owned.items():
        if tensor_name in head:
            continue
        tensors = [h.owned[tensor_name].detach() for h in handles]
        base = state.base_tensor(tensor_name).to(parameter.dtype)
        parameter.copy_(combine_deltas(tensors, combination, generator, base=base))
    if head:
        _fill_head(combined, handles, combination, head)


def _fill_head(
    combined: AdaptHandle,
    handles: Sequence[AdaptHandle],
    combination: Combination,
    head: set[str],
) -> None:
    positive = [(h, w) for h, w in zip(handles, combination.weights, strict=True) if w > 0]
    if not positive:
        raise ConfigError(
            "no source has a positive weight to give the combined adapter its head; give one "
            "source a positive weight"
        )
    total = sum(w for _, w in positive)
    for tensor_name in head:
        tensors = [h.owned[tensor_name].detach() * (w / total) for h, w in positive]
        combined.owned[tensor_name].copy_(torch.stack(tensors).sum(0))
