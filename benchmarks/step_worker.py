"""Measure one training configuration in this (fresh) process and write the result as JSON.

Run by `methods_step.py`, once per configuration and round, so peak memory never mixes
between configurations. Frameworks:

- ``adaptlab``: ``adaptlab.adapt(model, method, **options)`` (adaptlab's environment; with
  PYTHONPATH set, an earlier adaptlab's sources);
- ``adaptlab-composed``: a fusion or a stack of named adapters (adaptlab's environment);
- ``peft``: PEFT's LoRA, DoRA, (IA)3 and prefix tuning (adaptlab's environment, transformers 5);
- ``adaptlab-epochs``: adaptlab's training loop for a few epochs on random token sequences,
  with or without the frozen-activation cache; per-epoch seconds instead of steps;
- ``adapters``: the `adapters` library's Houlsby adapter or Fuse (its own environment,
  transformers 4.57);
- ``hf``: plain transformers full fine-tuning, every parameter trains (any environment).

Only torch, transformers, the standard library and the framework being measured are imported,
the framework lazily: the `adapters` environment has no adaptlab.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from step_harness import (
    MEMORY_DEFINITION,
    configure_threads,
    count_parameters,
    make_batch,
    measure_training_steps,
)
from torch import nn

Setup = tuple[nn.Module, dict[str, Any]]
"""The model ready to train and what the framework reports about it."""


RANDOM = {"random:mpnet-base": "MPNetConfig"}
"""Models built from a config with random weights: all-mpnet-base-v2's shape (12 layers, hidden
768, FFN 3072, vocabulary 30,527 are MPNetConfig's defaults) when its weights are not installed."""


def load_model(model_path: str) -> nn.Module:
    """The encoder at `model_path` (or a random one of a named shape) with a fresh 2-label head."""
    import transformers
    from transformers import AutoModelForSequenceClassification

    transformers.logging.set_verbosity_error()
    if model_path in RANDOM:
        torch.manual_seed(0)
        config = getattr(transformers, RANDOM[model_path])(num_labels=2)
        return AutoModelForSequenceClassification.from_config(config)
    return AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)


def setup_adaptlab(model: nn.Module, method: str, options: dict[str, Any]) -> Setup:
    """adaptlab's method with its defaults (the task head trains, as `adapt` does by default)."""
    import adaptlab

    handle = adaptlab.adapt(model, method, **options)
    return model, {
        "library": f"adaptlab {adaptlab.__version__}",
        "library_counts": handle.parameter_counts(),
    }


def setup_adaptlab_composed(model: nn.Module, method: str, options: dict[str, Any]) -> Setup:
    """adaptlab's composition of `adapters` named adapters (each `adapter`, e.g. pfeiffer):

    - ``fusion``: AdapterFusion over them; the fusion layers and the head train;
    - ``stack``: Stack(a0, ..., an); the top adapter and the head train.

    Each adapter has no head of its own (a fused or stacked adapter's head never runs).
    """
    import adaptlab

    names = [f"a{i}" for i in range(options["adapters"])]
    for seed, name in enumerate(names):
        adaptlab.add_adapter(model, name, options["adapter"], train_head=False, seed=seed)
    if method == "fusion":
        adaptlab.add_fusion(model, adaptlab.Fuse(*names))
        handle = adaptlab.train_adapter(model, "fusion")
    elif method == "stack":
        adaptlab.delete_adapter(model, names[-1])
        adaptlab.add_adapter(model, names[-1], options["adapter"], seed=len(names))
        adaptlab.set_active(model, adaptlab.Stack(*names))
        handle = adaptlab.train_adapter(model, names[-1])
    else:
        raise ValueError(f"adaptlab-composed: fusion or stack, got {method!r}")
    return model, {
        "library": f"adaptlab {adaptlab.__version__}",
        "library_counts": handle.parameter_counts(),
        "active": repr(adaptlab.active(model)),
    }


def setup_peft(model: nn.Module, method: str, options: dict[str, Any]) -> Setup:
    """PEFT's LoRA, DoRA, (IA)3 or prefix tuning; `extra_modules_to_save` adds modules (the
    pooler) so the trained head matches adaptlab's.

    With task_type SEQ_CLS PEFT always trains a copy of ``classifier``; adaptlab's head is the
    classifier and the pooler, so by default the trainable sets differ by the pooler.
    """
    import peft

    extra = list(options.get("extra_modules_to_save", []))
    saved = list(extra) or None  # PEFT extends the list it is given
    config: Any
    if method in ("lora", "dora"):
        config = peft.LoraConfig(
            task_type="SEQ_CLS",
            r=options["rank"],
            lora_alpha=options["alpha"],
            lora_dropout=options["dropout"],
            target_modules=list(options["targets"]),
            modules_to_save=saved,
            use_dora=method == "dora",
        )
    elif method == "ia3":
        config = peft.IA3Config(
            task_type="SEQ_CLS",
            target_modules=options["target_modules"],
            feedforward_modules=options["feedforward_modules"],
            modules_to_save=saved,
        )
    elif method == "prefix":
        config = peft.PrefixTuningConfig(
            task_type="SEQ_CLS",
            num_virtual_tokens=options["length"],
            prefix_projection=True,
            encoder_hidden_size=options["reparam_hidden"],
            modules_to_save=saved,
        )
    else:
        raise ValueError(f"peft: lora, dora, ia3 or prefix are benchmarked, got {method!r}")
    wrapped = peft.get_peft_model(model, config)
    trainable, _ = count_parameters(wrapped)
    extra_params = sum(
        p.numel()
        for n, p in wrapped.named_parameters()
        if p.requires_grad and any(f"{m}.modules_to_save." in n for m in extra)
    )
    return wrapped, {
        "library": f"peft {peft.__version__}",
        "peer_default_trainable": trainable - extra_params,
        "extra_trainable": extra,
    }


def setup_adapters(model: nn.Module, method: str, options: dict[str, Any]) -> Setup:
    """`adapters` Houlsby (DoubleSeqBnConfig); optionally also train the head and LayerNorms.

    `train_adapter` trains the adapter and the classifier only; adaptlab's houlsby also trains
    the pooler and every LayerNorm (as in Houlsby et al.), so `match_trainable` unfreezes those.
    """
    import adapters
    from adapters import DoubleSeqBnConfig

    if method == "fuse":
        return _setup_adapters_fuse(model, options)
    if method != "houlsby":
        raise ValueError(f"adapters: houlsby or fuse are benchmarked, got {method!r}")
    adapters.init(model)
    config = DoubleSeqBnConfig(
        reduction_factor=options["reduction_factor"], non_linearity=options["non_linearity"]
    )
    with_heads: Any = model  # adapters.init adds these methods to the model at run time
    with_heads.add_adapter("houlsby", config=config)
    with_heads.train_adapter("houlsby")

    def norm_or_head(name: str, module: nn.Module) -> bool:
        is_norm = isinstance(module, nn.LayerNorm) and ".adapters." not in f".{name}."
        return is_norm or name in HEAD

    return _adapters_setup(model, config, norm_or_head if options.get("match_trainable") else None)


def _setup_adapters_fuse(model: nn.Module, options: dict[str, Any]) -> Setup:
    """`adapters`' Fuse over `adapters` sequential bottlenecks (SeqBnConfig, Pfeiffer), trained
    with `train_adapter_fusion`; `match_trainable` also trains the head (pooler, classifier),
    as adaptlab's fusion does."""
    import adapters
    from adapters import Fuse, SeqBnConfig

    adapters.init(model)
    with_heads: Any = model  # adapters.init adds these methods to the model at run time
    names = [f"a{i}" for i in range(options["adapters"])]
    config = SeqBnConfig(reduction_factor=options["reduction_factor"])
    for name in names:
        with_heads.add_adapter(name, config=config)
    fuse = Fuse(*names)
    with_heads.add_adapter_fusion(fuse)
    with_heads.train_adapter_fusion(fuse)

    def head(name: str, module: nn.Module) -> bool:
        return name in HEAD

    return _adapters_setup(model, config, head if options.get("match_trainable") else None)


HEAD = ("bert.pooler", "classifier")
"""The modules of the classification head (pooler, classifier)."""


def _adapters_setup(
    model: nn.Module, config: Any, also_train: Callable[[str, nn.Module], bool] | None
) -> Setup:
    """The model `adapters` set up with `config`, the modules `also_train` picks (if given)
    trained too, and what the run records of it."""
    import adapters

    with_heads: Any = model  # adapters.init adds these methods to the model at run time
    default_trainable, _ = count_parameters(model)
    extra: list[str] = []
    if also_train is not None:
        for name, module in model.named_modules():
            if also_train(name, module):
                module.requires_grad_(True)
                extra.append(name)
    return model, {
        "library": f"adapters {adapters.__version__}",
        "peer_default_trainable": default_trainable,
        "extra_trainable": extra,
        "active_adapters": str(with_heads.active_adapters),
        "adapter_config": config.to_dict(),
    }


def setup_hf(model: nn.Module, method: str, options: dict[str, Any]) -> Setup:
    """Plain transformers full fine-tuning: every parameter trains."""
    if method != "full":
        raise ValueError(f"hf: only full fine-tuning is benchmarked, got {method!r}")
    model.requires_grad_(True)
    return model, {"library": "transformers"}


SETUPS = {
    "adaptlab": setup_adaptlab,
    "adaptlab-composed": setup_adaptlab_composed,
    "peft": setup_peft,
    "adapters": setup_adapters,
    "hf": setup_hf,
}


def set_priority(nice: int) -> str:
    """Give this process (and its autogroup, when it leads a new session) niceness `nice`.

    Linux schedules autogroups (one per session) fairly against each other, so a plain
    process nice does not take CPU from other sessions' work; the orchestrator starts the
    worker in a new session and the worker sets that session's autogroup nice too.
    """
    os.nice(nice - os.nice(0))
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(nice))
        with open("/proc/self/autogroup") as group:
            return group.read().strip()
    except OSError as exc:
        return f"process nice {os.nice(0)}; autogroup unchanged ({exc.strerror})"


def run_epochs(model: nn.Module, args: argparse.Namespace, options: dict[str, Any]) -> Setup:
    """adaptlab's training loop for `epochs` epochs of `examples` random sequences (lengths
    uniform in [seq_len / 4, seq_len], seeded), with the frozen cache as `frozen_cache` says."""
    from transformers import AutoTokenizer

    import adaptlab
    from adaptlab.data import TextEncoder
    from adaptlab.records.config import TrainConfig
    from adaptlab.runs.labelled_objective import train
    from adaptlab.tasks.registry import get_task

    handle = adaptlab.adapt(model, args.method, **options.get("method_options", {}))
    generator = torch.Generator().manual_seed(args.seed)
    vocab = int(getattr(model, "config").vocab_size)  # noqa: B009 (untyped attribute)

    def examples(count: int) -> list[dict[str, Any]]:
        rows = []
        for i in range(count):
            length = int(
                torch.randint(args.seq_len // 4, args.seq_len + 1, (), generator=generator)
            )
            ids = torch.randint(5, vocab, (length,), generator=generator).tolist()
            rows.append({"input_ids": ids, "attention_mask": [1] * length, "labels": i % 2})
        return rows

    tokenizer = AutoTokenizer.from_pretrained(options["tokenizer"])
    config = TrainConfig(
        epochs=options["epochs"], batch_size=args.batch_size, eval_batch_size=args.batch_size
    )
    history = train(
        model,
        TextEncoder(tokenizer, get_task("single_label"), 2, max_length=args.seq_len),
        examples(options["examples"]),
        examples(args.batch_size),
        "single_label",
        ["a", "b"],
        config,
        1e-4,
        progress=False,
        frozen_cache=options["frozen_cache"],
    )
    return model, {
        "library_counts": handle.parameter_counts(),
        "frozen_blocks": handle.state.frozen_blocks,
        "epoch_seconds": [e.seconds for e in history.epochs],
        "train_loss": [e.train_loss for e in history.epochs],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load, adapt, measure; everything the orchestrator needs as one JSON-ready mapping."""
    import transformers

    priority = set_priority(args.nice) if args.nice else None
    configure_threads(args.threads)
    options = json.loads(args.options)
    if args.framework == "adaptlab-epochs":
        started = time.perf_counter()
        model, info = run_epochs(load_model(args.model_path), args, options)
        return {
            "framework": args.framework,
            "method": args.method,
            "options": options,
            **info,
            "wall_seconds": time.perf_counter() - started,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
    start = time.perf_counter()
    model = load_model(args.model_path)
    vocab_size = int(getattr(model, "config").vocab_size)  # noqa: B009 (untyped attribute)
    model, info = SETUPS[args.framework](model, args.method, options)
    setup_seconds = time.perf_counter() - start
    trainable, total = count_parameters(model)
    batch = make_batch(vocab_size, args.batch_size, args.seq_len, args.seed)
    measurement = measure_training_steps(model, batch, warmup=args.warmup, steps=args.steps)
    missing_grads = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    return {
        "framework": args.framework,
        "method": args.method,
        "options": options,
        "trainable": trainable,
        "total": total,
        "setup_seconds": setup_seconds,
        "params_without_grad": missing_grads,
        **info,
        "measurement": measurement.to_dict(),
        "memory_definition": MEMORY_DEFINITION,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "nice": os.nice(0),
        "priority": priority,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line of one measurement (the orchestrator fills every option)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted([*SETUPS, "adaptlab-epochs"]), required=True)
    parser.add_argument("--method", required=True)
    parser.add_argument("--options", default="{}", help="method options as JSON")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nice", type=int, default=0, help="niceness (negative needs root)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Measure and write the result file."""
    args = parse_args(argv)
    result = run(args)
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
