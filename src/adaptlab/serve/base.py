"""One copy of the base model's weights, shared by every model the server builds on it.

Adapters with different heads (2 labels, 3 labels, token tags) cannot share one model
object, but they can share its weights: each head shape gets its own model whose
pretrained parameters are the very tensors of the first model loaded (only the head and
pooler, a few kilobytes to a megabyte, are its own; an LM head tied to the input embeddings
stays tied to the shared ones). A fusion or stack, which brings its
member adapters under their saved names, gets a model of its own built the same way.
"""

from __future__ import annotations

import json

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.methods.manifest import Manifest
from adaptlab.models.device import torch_device
from adaptlab.models.fingerprint import fingerprint
from adaptlab.models.loading import ModelKind, load_model, load_tokenizer
from adaptlab.serve.registry import CAUSAL_LM, is_causal_lm
from adaptlab.tasks.registry import get_task


class SharedBase:
    """The base model `model_id` on `device`: its tokenizer, its weights loaded once."""

    def __init__(self, model_id: str, device: str = "cpu") -> None:
        self.model_id = model_id
        self.device = torch_device(device)
        self.tokenizer = load_tokenizer(model_id)
        self._weights: dict[str, nn.Parameter] = {}
        self._shared: dict[tuple[ModelKind, tuple[str, ...]], nn.Module] = {}
        self._fingerprints: dict[tuple[str, str], tuple[str, str]] = {}

    def shared_model(self, task: ModelKind, labels: tuple[str, ...]) -> nn.Module:
        """The model that every plain adapter with this task and these labels shares."""
        key = (task, labels)
        if key not in self._shared:
            self._shared[key] = self.new_model(task, labels)
        return self._shared[key]

    def new_model(self, task: ModelKind, labels: tuple[str, ...]) -> nn.Module:
        """A model for `task` with a head for `labels`, its pretrained weights shared."""
        names = labels or None  # a head of no named outputs: regression's, an LM's
        model: nn.Module = load_model(self.model_id, task, label_names=names, seed=0).model
        head = tuple(f"{name}." for name in find_backbone(model).head)
        swapped: dict[int, nn.Parameter] = {}  # a weight tied to a shared one (LM head) follows
        for name, parameter in list(model.named_parameters(remove_duplicate=False)):
            shared = swapped.get(id(parameter))
            if shared is None:
                if name.startswith(head):
                    continue
                shared = self._weights.setdefault(name, parameter)
                if shared is parameter or shared.shape != parameter.shape:
                    continue
                swapped[id(parameter)] = shared
            owner, _, attribute = name.rpartition(".")
            setattr(model.get_submodule(owner), attribute, shared)
        model.requires_grad_(False)
        model.to(self.device)
        return model.eval()

    def fits(self, manifest: Manifest) -> str | None:
        """None if an adapter with this manifest runs on this base, else why it does not."""
        model_class, found = self._fingerprint(manifest)
        base = manifest.base_model
        if base.model_class != model_class:
            return (
                f"it was trained on a {base.model_class}; its task {manifest.task} runs on a "
                f"{model_class} here"
            )
        if base.fingerprint != found:
            return (
                f"it was trained on base {base.id!r} (fingerprint {base.fingerprint}); "
                f"the served base {self.model_id!r} has fingerprint {found}"
            )
        return None

    def _fingerprint(self, manifest: Manifest) -> tuple[str, str]:
        """(model class, fingerprint without the head) of the model for the manifest's task."""
        overrides = json.dumps(manifest.backbone_overrides, sort_keys=True)
        task = manifest.task or ""
        kind = CAUSAL_LM if is_causal_lm(manifest) else get_task(task).model_kind
        key = (kind, overrides)
        if key not in self._fingerprints:
            # a fresh model: a shared one may be running an adapter's own norms or biases
            model = self.new_model(kind, () if kind == CAUSAL_LM else manifest.label_names or ())
            head = find_backbone(model, manifest.backbone_overrides).head
            with torch.no_grad():
                self._fingerprints[key] = (type(model).__name__, fingerprint(model, exclude=head))
        return self._fingerprints[key]
