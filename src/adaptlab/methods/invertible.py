"""Invertible adapters: MAD-X's language-specific transformation of the token embeddings.

MAD-X (Pfeiffer et al. 2020, "MAD-X: An Adapter-Based Framework for Multi-Task Cross-Lingual
Transfer", §2.2) puts an invertible adapter A on the output of the embedding layer and its
inverse A^-1 on the input of the output embeddings (the LM head's tied decoder), so that a
language adapter trained with masked language modelling adapts the vocabulary's representation
at both ends. A is an additive coupling (Dinh et al. 2015, NICE) of the embedding e split into
halves e1, e2, with F and G two bottleneck networks:

    o1 = e1 + F(e2),    o2 = e2 + G(o1),    A(e) = [o1, o2]
    e2 = o2 - G(o1),    e1 = o1 - F(e2),    A^-1(o) = [e1, e2]

F and G reduce the half width by `reduction_factor` (2, MAD-X's setting). Their up-projections
start at zero, so A is the identity at initialisation, exactly. A model without output
embeddings (a sequence classifier, where MAD-X trains the task adapter) gets A alone.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from adaptlab.backbone.parts import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.bottleneck import Bottleneck
from adaptlab.methods.results import ApplyContext
from adaptlab.methods.site import InputModule, Insertion, SiteModule


class InvertibleCoupling(SiteModule):
    """A(e) on the embedding layer's output; `inverse` is A^-1."""

    fusable = False

    def __init__(
        self, width: int, reduction_factor: int, init_std: float, generator: torch.Generator
    ) -> None:
        super().__init__()
        half = width // 2
        size = max(1, half // reduction_factor)
        self.f = Bottleneck(half, size, "relu", init_std, generator)
        self.g = Bottleneck(half, size, "relu", init_std, generator)

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        e1, e2 = h.chunk(2, dim=-1)
        o1 = e1 + self.f.delta(e2)
        return torch.cat((o1, e2 + self.g.delta(o1)), dim=-1)

    def inverse(self, o: torch.Tensor) -> torch.Tensor:
        o1, o2 = o.chunk(2, dim=-1)
        e2 = o2 - self.g.delta(o1)
        return torch.cat((o1 - self.f.delta(e2), e2), dim=-1)


class InverseCoupling(InputModule):
    """A^-1 on the input of the output embeddings, with the coupling's own F and G (shared,
    not copied: this module holds no parameters and saves nothing)."""

    def __init__(self, coupling: InvertibleCoupling) -> None:
        super().__init__()
        object.__setattr__(self, "coupling", coupling)  # a reference, not a submodule

    def rewrite(self, x: torch.Tensor) -> torch.Tensor:
        coupling: InvertibleCoupling = self.__dict__["coupling"]
        return coupling.inverse(x)


def invertible_insertions(
    model: nn.Module,
    backbone: Backbone,
    method: str,
    reduction_factor: int,
    init_std: float,
    ctx: ApplyContext,
) -> list[Insertion]:
    """A on the embedding layer's output, and A^-1 before the output embeddings if any."""
    if not isinstance(model, PreTrainedModel):
        raise ConfigError(f"{method}: invertible adapters need a transformers model")
    table = model.get_input_embeddings()
    assert isinstance(table, nn.Embedding)
    width = table.embedding_dim
    if width % 2:
        raise ConfigError(
            f"{method}: an invertible adapter splits the embeddings in halves; their width "
            f"{width} is odd"
        )
    coupling = InvertibleCoupling(
        width, reduction_factor, init_std, ctx.generator(backbone.embeddings)
    )
    insertions = [Insertion(backbone.embeddings, coupling)]
    decoder = model.get_output_embeddings()
    if decoder is not None:
        name = next(n for n, m in model.named_modules() if m is decoder)
        if getattr(decoder, "in_features", width) != width:
            raise ConfigError(
                f"{method}: the output embeddings {name!r} read width "
                f"{decoder.in_features}, the input embeddings have {width}; an invertible "
                "adapter needs both the same"
            )
        insertions.append(Insertion(name, InverseCoupling(coupling)))
    return insertions
