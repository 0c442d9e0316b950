"""The weight matrices of a model's blocks that its adapter changes, each with its update ΔW.

- Mergeable methods (LoRA, DoRA, (IA)3): ΔW is what merging writes into the weight (the
  merged weight minus the weight, the model left exactly as it was), so every method that
  declares how it merges is measured by its own merge: LoRA's s B A, DoRA's rescaled sum,
  (IA)3's rows and columns rescaled.
- Methods that train the base's own weights (full, freeze): the trained weight minus the
  base's.
- Methods that insert modules beside the weights (bottleneck adapters, prefix tuning, Ladder
  Side-Tuning, AdapterFusion) change no weight matrix; vectors (BitFit's biases, LN-tuning's
  norms) are no matrices. They are named in `WeightUpdates.without_matrix`.

Every matrix is read as (out, in) (GPT-2's Conv1D transposed). A fused layer's parts (the query,
key and value rows of GPT-2's `c_attn`) are matrices of their own, as Llama's `q_proj` is; so is
each expert of a mixture (its slice of a 3-D weight).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from adaptlab.analysis.spectrum import EPSILON, TOP_K, layer_summaries, update_spectrum
from adaptlab.backbone.linear import is_conv1d
from adaptlab.backbone.parts import Backbone, get_module
from adaptlab.backbone.roles import ROLES
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.registry import get_method
from adaptlab.methods.site import SiteModule

ATTENTION_ROLES = ("query", "key", "value", "attention_out")
FFN_ROLES = ("ffn_in", "ffn_out", "experts")


@dataclass(frozen=True)
class WeightUpdate:
    """One weight matrix W of a block, (out, in), and its update ΔW."""

    name: str  # the module, and the part or expert in brackets
    layer: int  # the block's index, bottom to top
    role: str  # query, key, value, attention_out, ffn_in, ffn_out, experts, or the module's name
    kind: str  # attention, ffn or other
    weight: torch.Tensor
    delta: torch.Tensor


@dataclass
class WeightUpdates:
    """The matrices an adapter changes, and its methods that change none."""

    matrices: list[WeightUpdate] = field(default_factory=list)
    without_matrix: list[str] = field(default_factory=list)


Place = tuple[int, str, tuple[tuple[str, torch.Tensor | None], ...]]
"""Where a module sits: its block, its role, and its parts (name, rows; None: the whole layer)."""


def weight_updates(model: nn.Module, handle: AdaptHandle) -> WeightUpdates:
    """Every block weight matrix `handle` (active on `model`) changes, with its ΔW."""
    deltas: dict[str, torch.Tensor] = {}
    changing: set[str] = set()
    for method, insertions in handle.insertions.items():
        for insertion in (i for i in insertions if i.module.mergeable):
            changing.add(method)
            site = get_module(model, insertion.site)
            for name, delta in _merged_deltas(site, insertion.module).items():
                _add(deltas, f"{insertion.site}.{name}", delta)
    blocks = tuple(f"{b.name}." for b in handle.backbone.blocks)
    head = set(handle.groups.get(HEAD_GROUP, ()))
    for name, tensor in handle.owned.items():
        base = handle.state.base_tensor(name)
        if name not in head and name.startswith(blocks) and base.dim() >= 2:
            _add(deltas, name, tensor.detach().float() - base.detach().float())
            changing |= {c.name for c in handle.configs if get_method(c.name).trains_base_weights}
    places = _places(handle.backbone)
    return WeightUpdates(
        matrices=[m for n, d in deltas.items() for m in _matrices(model, n, d, places, handle)],
        without_matrix=[c.name for c in handle.configs if c.name not in changing],
    )


def _add(deltas: dict[str, torch.Tensor], name: str, delta: torch.Tensor) -> None:
    deltas[name] = deltas[name] + delta if name in deltas else delta


def _merged_deltas(site: nn.Module, module: SiteModule) -> dict[str, torch.Tensor]:
    """What merging `module` into `site` adds to each of the site's own parameters of two or
    more dimensions; the site is left as it was, bit for bit."""
    originals = {n: p.detach().clone() for n, p in site.named_parameters(recurse=False)}
    matrices = [n for n, p in originals.items() if p.dim() >= 2]
    with torch.no_grad():
        module.merge_into(site)
        merged = {n: getattr(site, n).detach().float().clone() for n in matrices}
        module.unmerge_from(site)
        for n, original in originals.items():  # biases too: (IA)3 rescales them
            getattr(site, n).copy_(original)
    return {n: merged[n] - originals[n].float() for n in matrices}


def _places(backbone: Backbone) -> dict[str, Place]:
    """Module -> where it sits (`Place`)."""
    places: dict[str, Place] = {}
    for block in backbone.blocks:
        for role in ROLES:
            for part in block.parts(role):
                rows = None if part.rows is None else part.rows.indices()
                _, _, known = places.get(part.module, (block.index, role, ()))
                places[part.module] = (block.index, role, (*known, (part.name, rows)))
        if block.experts is not None:
            places[block.experts] = (block.index, "experts", ())
    return places


def _matrices(
    model: nn.Module, name: str, delta: torch.Tensor, places: dict[str, Place], handle: AdaptHandle
) -> list[WeightUpdate]:
    """The (out, in) matrices of parameter `name` and its `delta`: one, one per part of a fused
    layer, or one per expert."""
    module_name, _, attribute = name.rpartition(".")
    module = get_module(model, module_name)
    weight = getattr(module, attribute).detach().float()
    if is_conv1d(module):
        weight, delta = weight.T, delta.T
    blocks = handle.backbone.blocks
    layer = next(b.index for b in blocks if module_name.startswith(f"{b.name}."))
    _, role, parts = places.get(module_name, (layer, module_name.rsplit(".", 1)[-1], ()))
    kind = "attention" if role in ATTENTION_ROLES else "ffn" if role in FFN_ROLES else "other"
    if weight.dim() == 3:
        return [
            WeightUpdate(f"{name}[{e}]", layer, role, kind, weight[e], delta[e])
            for e in range(weight.shape[0])
        ]
    sliced = [(part, rows) for part, rows in parts if rows is not None]
    if not sliced:
        return [WeightUpdate(name, layer, role, kind, weight, delta)]
    return [
        WeightUpdate(f"{name}[{part}]", layer, part, kind, weight[rows], delta[rows])
        for part, rows in sliced
        if bool(delta[rows].any())
    ]


def model_spectrum(
    model: nn.Module, top_k: int = TOP_K, epsilon: float = EPSILON
) -> dict[str, Any]:
    """The spectrum of every weight matrix the adapted `model` changes (`update_spectrum`):
    the methods, those that change no matrix, each matrix's figures and their per-layer
    summaries (no matrix at all where the methods change none)."""
    handle = get_handle(model)
    updates = weight_updates(model, handle)
    matrices = [
        {
            "name": m.name,
            "layer": m.layer,
            "role": m.role,
            "kind": m.kind,
            "shape": list(m.weight.shape),
            **update_spectrum(m.weight, m.delta, top_k, epsilon).to_dict(),
        }
        for m in updates.matrices
    ]
    return {
        "methods": list(handle.method_names),
        "without_matrix": updates.without_matrix,
        "top_k": top_k,
        "epsilon": epsilon,
        "matrices": matrices,
        "layers": layer_summaries(matrices),
    }
