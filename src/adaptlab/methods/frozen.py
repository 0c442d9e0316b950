"""The frozen front of a model, and the rule that it runs without dropout.

When nothing that trains sits in the embeddings or in the first k blocks (nor in anything that
runs before them), and no inserted module changes those blocks' outputs before block k, the
output of block k - 1 is a fixed function of the input: `head` (k = every block), `freeze`
(its k), Ladder Side-Tuning (every block: its side network only reads the blocks' outputs).
That part runs without dropout, with or without the frozen-activation cache, so its output is
the same every time an example comes back (a cached output could not be re-sampled anyway).
Dropout elsewhere (the head, trained blocks, inserted modules) is unchanged.

"Runs before the blocks" is read from the order in which the model registers its modules
(HF models register them in the order they run: ELECTRA's embedding projection comes between
its embeddings and its blocks).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone import INSERTED, Backbone


def frozen_blocks(model: nn.Module, backbone: Backbone, changed_outputs: Iterable[str]) -> int:
    """How many leading blocks (with the embeddings) hold nothing that trains, 0 to all.

    `changed_outputs`: sites whose output an active inserted module changes; the blocks
    after a changed block output are not frozen (their input depends on what trains).
    """
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    if not trainable:
        return 0
    order = {name: i for i, (name, _) in enumerate(model.named_modules())}
    start = order[backbone.blocks_name]
    before = [n for n in trainable if order.get(_module_of(n), start) < start]
    if any(not _under(n, backbone.blocks_name) for n in before):
        return 0
    changed = set(changed_outputs)
    count = 0
    for block in backbone.blocks:
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
    """Hooks that run each named module with its own submodules in eval mode (no dropout).

    Modules adaptlab inserted at that module itself (a side network's ladder at a block)
    keep the model's mode; those deeper inside are part of the frozen computation.
    """
    handles: list[RemovableHandle] = []
    for name in names:
        module = model.get_submodule(name) if name else model
        own = f"{INSERTED}."
        inner = [m for n, m in module.named_modules() if not n.startswith(own) and n != INSERTED]
        pre, post = _eval_while_running(inner)
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, always_call=True))
    return handles


def _eval_while_running(modules: list[nn.Module]) -> tuple[Any, Any]:
    switched: list[list[nn.Module]] = []

    def pre(module: nn.Module, args: Any) -> None:
        training = [m for m in modules if m.training]
        for m in training:
            m.training = False
        switched.append(training)

    def post(module: nn.Module, args: Any, output: Any) -> None:
        for m in switched.pop():
            m.training = True

    return pre, post


def _module_of(parameter: str) -> str:
    return parameter.rpartition(".")[0]


def _under(name: str, module: str) -> bool:
    return name.startswith(f"{module}.")
