"""The frozen front of a model, and the rule that it runs without dropout.

When nothing that trains sits in the embeddings or in the first k blocks (nor in anything that
runs before them), and no inserted module changes those blocks' outputs before block k, the
output of block k - 1 is a fixed function of the input: `head` (k = every block), `freeze`
(its k), Ladder Side-Tuning (every block: its side network only reads the blocks' outputs).
That part runs without dropout, with or without the frozen-activation cache, so its output is
the same every time an example comes back (a cached output could not be re-sampled anyway).
Dropout elsewhere (the head, trained blocks, a side network) is unchanged.

"Runs before the blocks" is read from the order in which the model registers the modules of
its body (HF models register them in the order they run: ELECTRA's embedding projection comes
between its embeddings and its blocks); the task head runs last wherever it is registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone.parts import INSERTED, Backbone, is_inserted
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.site import OUTPUT


def frozen_blocks(
    model: nn.Module, backbone: Backbone, trainable: Iterable[str], changed_outputs: Iterable[str]
) -> int:
    """How many leading blocks (with the embeddings) hold nothing that trains, 0 to all.

    `trainable`: names of the parameters that run and train. `changed_outputs`: sites whose
    output a running inserted module changes; the blocks after a changed block output are not
    frozen (their input depends on what trains).
    """
    trainable = list(trainable)
    if not trainable:
        return 0
    order = {name: i for i, (name, _) in enumerate(model.named_modules())}
    start = order[backbone.blocks_name]
    head = tuple(f"{h}." for h in backbone.head)  # runs last, wherever it is registered
    before = [n for n in trainable if order.get(_module_of(n), start) < start]
    if any(not _under(n, backbone.blocks_name) and not n.startswith(head) for n in before):
        return 0
    changed = set(changed_outputs)
    count = 0
    for block in backbone.blocks:
        if not _under(block.name, backbone.blocks_name):
            break  # a decoder's blocks also read the decoder's own inputs
        own = f"{block.name}.{INSERTED}."
        if any(_under(n, block.name) and not n.startswith(own) for n in trainable):
            break
        count += 1
        if block.name in changed:
            break
    return count


def frozen_modules(model: nn.Module, backbone: Backbone, blocks: int) -> list[str]:
    """The modules that run without dropout for `blocks` frozen blocks: embeddings and blocks."""
    if blocks == 0:
        return []
    return [backbone.embeddings, *(b.name for b in backbone.blocks[:blocks])]


def quiet(model: nn.Module, names: Iterable[str]) -> list[RemovableHandle]:
    """Hooks that run each named module with every dropout inside it at probability 0.

    Dropout modules and the float dropout rates attention modules keep (Llama's
    `attention_dropout`) are set to 0 while the module runs and put back afterwards, so
    nothing else about the training mode changes. Modules adaptlab inserted at the named
    module itself (a side network's ladder at a block) keep their dropout; those deeper
    inside are part of the frozen computation.
    """
    handles: list[RemovableHandle] = []
    for name in names:
        module = model.get_submodule(name) if name else model
        own = f"{INSERTED}."
        inner = [m for n, m in module.named_modules() if not n.startswith(own) and n != INSERTED]
        rates = [(m, a) for m in inner for a in dropout_rates(m)]
        if rates:
            pre, post = _zero_while_running(rates)
            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post, always_call=True))
    return handles


def dropout_rates(module: nn.Module) -> list[str]:
    """Attributes of `module` that hold a dropout probability."""
    if isinstance(module, nn.Dropout):
        return ["p"]
    return [
        name
        for name, value in vars(module).items()
        if "dropout" in name and isinstance(value, float) and not isinstance(value, bool)
    ]


def _zero_while_running(rates: list[tuple[nn.Module, str]]) -> tuple[Any, Any]:
    saved: list[list[float]] = []

    def pre(module: nn.Module, args: Any) -> None:
        saved.append([getattr(m, a) for m, a in rates])
        for m, a in rates:
            setattr(m, a, 0.0)

    def post(module: nn.Module, args: Any, output: Any) -> None:
        for (m, a), value in zip(rates, saved.pop(), strict=True):
            setattr(m, a, value)

    return pre, post


def _module_of(parameter: str) -> str:
    return parameter.rpartition(".")[0]


def _under(name: str, module: str) -> bool:
    return name.startswith(f"{module}.")


class QuietFront:
    """The dropout-free hooks of one model: its frozen front, and the modules the running
    adapters ask for (`MethodResult.no_dropout`); `blocks` is how many blocks are frozen now."""

    def __init__(self, model: nn.Module, backbone: Backbone) -> None:
        self.model = model
        self.backbone = backbone
        self.blocks = 0
        self._hooks: list[RemovableHandle] = []

    def refresh(self, running: Sequence[AdaptHandle]) -> None:
        """Recompute the frozen front for the `running` units and what trains now."""
        changed = {
            i.site
            for unit in running
            for ins in unit.insertions.values()
            for i in ins
            if i.module.acts_on == OUTPUT and i.module.changes_output
        }
        inserted = {n for unit in running for n in unit.inserted_tensors()}
        trainable = [
            n
            for n, p in self.model.named_parameters()
            if p.requires_grad and (n in inserted or not is_inserted(n))
        ]
        self.blocks = frozen_blocks(self.model, self.backbone, trainable, changed)
        names = frozen_modules(self.model, self.backbone, self.blocks)
        self._set([*names, *(n for unit in running for n in unit.no_dropout)])

    def remove(self) -> None:
        """Every dropout-free hook goes."""
        self._set([])

    def _set(self, names: list[str]) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = quiet(self.model, dict.fromkeys(names))
