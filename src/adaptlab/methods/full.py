"""Full fine-tuning: every parameter trains; optionally regularised by mixout.

Mixout (Lee et al. 2020, "Mixout: Effective Regularization to Finetune Large-scale Pretrained
Language Models", §3): while training, each linear layer's weight w is replaced by
u + M (w - u) / (1 - p), u the pretrained weight and M a Bernoulli(1 - p) mask drawn per
input unit at every forward (as dropout drops a unit; the authors' MixLinear), so that on
average the layer is w and each unit falls back to its pretrained weights with probability p.
The rescaling is the paper's: E[u + M (w - u) / (1 - p)] = w. Mixout replaces dropout, which
is switched off in the whole model while it trains, as He et al. 2021 compare it
(paper-effectiveness, Table 7 and its text: p = 0.9, "replacing all dropout modules in the
network with mixout"; "it replaces all outgoing parameters from a randomly selected neuron").
Bias terms, the task head (freshly initialised, so it has no pretrained value) and the
embeddings are not mixed out. In eval mode the layer is w.
"""

from __future__ import annotations

import torch
from torch import nn

from adaptlab.backbone.linear import input_dim, is_linear
from adaptlab.backbone.parts import Backbone
from adaptlab.methods.configs.full import FullConfig
from adaptlab.methods.params import pretrained_names
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion, WeightModule


class Mixout(WeightModule):
    """The weight of one linear layer, mixed with its pretrained value while training."""

    def __init__(self, pretrained: torch.Tensor, probability: float, inputs: int = 1) -> None:
        super().__init__()
        self.register_buffer("pretrained", pretrained, persistent=False)
        self.probability = probability
        self.inputs = inputs  # the weight's dimension over input units (0 for GPT-2's Conv1D)

    def replace_weight(self, w: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return w
        u = self.pretrained
        assert isinstance(u, torch.Tensor)
        shape = [1] * w.dim()
        shape[self.inputs] = w.shape[self.inputs]
        keep = torch.empty(shape, device=w.device, dtype=w.dtype)
        keep.bernoulli_(1 - self.probability)
        return u + (w - u) * (keep / (1 - self.probability))


def apply(
    model: nn.Module, backbone: Backbone, config: FullConfig, ctx: ApplyContext
) -> MethodResult:
    result = MethodResult(groups={"all": pretrained_names(model)})
    if config.mixout == 0:
        return result
    head = tuple(f"{name}." for name in backbone.head)
    for name, layer in model.named_modules():
        if is_linear(layer) and not f"{name}.".startswith(head):
            # the adapter trains its own copy of w; with keep_initial=False it trains the
            # model's tensor itself, so the pretrained value is kept apart
            pretrained = ctx.pretrained(model, f"{name}.weight").detach()
            if not ctx.keep_initial:
                pretrained = pretrained.clone()
            mixout = Mixout(pretrained, config.mixout, input_dim(layer))
            result.insertions.append(Insertion(name, mixout))
    result.no_dropout.add("")
    return result
