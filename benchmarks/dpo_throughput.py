"""DPO throughput and step memory: adaptlab's DPO step against TRL's `DPOTrainer` + PEFT.

SmolLM2-135M (`smollm2-135m`), LoRA r = 16 (alpha 32, no dropout) on every linear layer of the
blocks, fp32, no gradient checkpointing, dropout off, beta 0.1, the sigmoid loss, AdamW, batch
`--batch-size` pairs, on the first training pairs of the built-in `countries-qa-pairs` (a
question, its right answer chosen, another country's answer rejected). Both sides are built in
this one process and step on the same batches, in the same order:

- adaptlab: the run `adaptlab train --task dpo` prepares (`prepare_run`: the pairs written as a
  data folder, read and encoded, the model loaded, LoRA attached, dropout off), and per step the
  loop's work (`engine.loop.train_epochs`): `PreferenceLm.loss` (one forward over the chosen
  then the rejected rows, the reference the same model with the adapter off, under no gradient,
  log-probabilities of the answers' tokens only through the chunked LM head), then
  `Precision.step` (backward, gradient clipping at 1.0, AdamW, gradients freed) and the schedule;
- TRL 1.16: `DPOTrainer(peft_config=LoraConfig(...))` on the same text pairs, per step what its
  training loop does: `training_step` (`compute_loss`: the policy forward through TRL's fused LM
  head, the reference with the adapter disabled under no gradient, the loss and its logged
  metrics; then backward), gradient clipping at 1.0, its (fused) AdamW, the schedule,
  `zero_grad`. Its batches come from its own dataloader, in order.

The JSON records, batch by batch, that both sides read the same token ids, attention and
answer masks, and the loss of each step (the first step's is log 2 on both sides: LoRA starts
at zero, so the policy is the reference).

Timing: one warm-up step each, then `--steps` rounds, each one step of each side on the same
batch, the side going first alternating; pairs per second = batch / median step seconds (wall
clock, and in this process's CPU time, which waiting for a busy core does not count). Memory:
one more step of each side, on the same batch, under torch's profiler; its peak of live tensor
bytes above what was live as the step began (`step_memory.events_peak`, as `step_memory.py`
and `sft_throughput.py` count it).

Also counted on fake tensors, as `large_model_memory.py` counts (no timing): the peak of live
tensor bytes of one DPO AdamW step at the TinyLlama-1.1B shape (LoRA as above, weights
included), `--fake-pairs` pairs of `--fake-length` tokens: adaptlab's `PreferenceLm.loss`, and
TRL's own `DPOTrainer._compute_loss` (its fused LM head's torch path, what a CPU runs; a GPU
runs Triton kernels) called on a stand-in for the trainer that holds what `_compute_loss` reads;
in fp32 without checkpointing as above, and on a bf16 base with bf16 autocast and checkpointing
(TRL's `DPOConfig` defaults; adaptlab's `--precision bf16 --base-dtype bf16
--gradient-checkpointing`). Fake tensors cannot pick positions by value, so every position
after a row's first is an answer token there (`fake_step`): adaptlab's head then scores as many
positions as TRL's. The check lines count the same steps real and fake on a small shape.

Goals (reported, never asserted): adaptlab >= 1.2 x TRL's pairs per second, its step peak
<= 0.8 x TRL's.

Usage (from the repository root; about 4 minutes on 2 busy cores, `--quick` under a minute)::

    OMP_WAIT_POLICY=PASSIVE flock /tmp/adaptlab-bench.lock .venv/bin/python \\
        benchmarks/dpo_throughput.py
    .venv/bin/python benchmarks/dpo_throughput.py --quick    # batch 2, 2 rounds, tiny fake shape
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import tempfile
import time
import types
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from large_model_memory import check_lines, fake_peaks
from large_model_setups import SHAPES, Setup, Step
from report_file import goal, heading, versions, write_report
from step_memory import events_peak
from tensor_bytes import LiveBytes, OpMode
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor
from torch.profiler import ProfilerActivity, profile
from trl_comparison import (
    ALL_LINEAR,
    ALPHA,
    LORA_SETTINGS,
    RANK,
    SEED,
    SharedSettings,
    check_shapes,
    command_line,
    peft_lora,
    start,
)

from adaptlab.data.preference import Preference
from adaptlab.data.preference_loading import load_preferences
from adaptlab.tasks.registry import LABELLED

OUT = Path(__file__).resolve().parent / "results" / "dpo_throughput.json"
CORPUS = "countries-qa-pairs"
MB, GIB = 1e6, 1024**3
GOAL_SPEED, GOAL_PEAK = 1.2, 0.8
BETA = 0.1
LEARNING_RATE = 5e-6
WEIGHT_DECAY = 0.01
MAX_GRAD_NORM = 1.0
TRL_OUTPUTS = ("log_probs", "entropy", "mean_logits", "is_top1")
"""What `DPOTrainer` asks its fused LM head for (its metrics: entropy, logits/*, accuracy)."""

Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Settings(SharedSettings):
    """What both sides share."""

    warmup: int
    rounds: int

    @property
    def batches(self) -> int:
        """Batches each side steps on: the warm-up ones, one per round, the profiled one."""
        return self.warmup + self.rounds + 1


@dataclass
class Side:
    """One side of the comparison: its batches and one optimizer step on a batch."""

    name: str
    batches: list[Batch]
    step: Callable[[Batch], torch.Tensor]
    model: nn.Module
    notes: dict[str, Any]
    seconds: list[float]
    cpu_seconds: list[float]
    losses: list[float]
    peak_bytes: int = 0

    def run(self, index: int, timed: bool) -> None:
        """Step on batch `index`; its wall and CPU seconds kept when `timed`."""
        wall, cpu = time.perf_counter(), time.process_time()
        loss = self.step(self.batches[index])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.losses.append(float(loss))
        if timed:
            self.seconds.append(wall)
            self.cpu_seconds.append(cpu)

    def profiled(self, index: int) -> None:
        """Step on batch `index` under the profiler; keep the live-tensor peak above its start."""
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            loss = self.step(self.batches[index])
        self.losses.append(float(loss))
        self.peak_bytes = events_peak(profiler)


def select_pairs(count: int) -> list[Preference]:
    """The first `count` training pairs of the corpus."""
    pairs = load_preferences(CORPUS, LABELLED, shape="preference").splits["train"][:count]
    if len(pairs) < count or not all(isinstance(p, Preference) for p in pairs):
        raise SystemExit(f"{CORPUS}: fewer than {count} training pairs")
    return [p for p in pairs if isinstance(p, Preference)]


def record(pair: Preference) -> dict[str, Any]:
    """A pair as a JSONL record (adaptlab's data folder) and a dataset row (TRL)."""
    return {"prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected}


def adaptlab_side(pairs: Sequence[Preference], settings: Settings) -> Side:
    """`adaptlab train --task dpo`'s objective over `pairs`, and the loop's step."""
    from adaptlab.engine.optimizer import optimizer_and_schedule
    from adaptlab.engine.precision import Precision, keep_trained_in_float32
    from adaptlab.records.config import TrainConfig
    from adaptlab.records.spec import RunSpec
    from adaptlab.runs.preparers import prepare_run
    from adaptlab.tasks.registry import run_task

    train = TrainConfig(
        epochs=1,
        batch_size=settings.batch,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        max_length=settings.max_length,
        eval_batch_size=settings.batch,
        seed=SEED,
    )
    lora = {"rank": RANK, "alpha": float(ALPHA), "dropout": 0.0, "targets": ALL_LINEAR}
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        write_jsonl(data / "train.jsonl", pairs)
        for split in ("dev", "test"):  # one pair each: never scored here
            write_jsonl(data / f"{split}.jsonl", pairs[:1])
        spec = RunSpec.build(
            settings.model,
            str(data),
            {"lora": lora},
            train=train,
            data_options={"task": "dpo", "beta": BETA},
            device="cpu",
        )
        objective: Any = prepare_run(run_task(spec.task), spec, torch.device("cpu"))
    if len(objective.train_pairs) != len(pairs):
        raise SystemExit(f"adaptlab kept {len(objective.train_pairs)} of {len(pairs)} pairs")
    model = objective.model
    model.train()
    trainable = keep_trained_in_float32(model)
    parameters = [p for _, p in trainable]
    optimizer, scheduler = optimizer_and_schedule(trainable, train, LEARNING_RATE, settings.batches)
    precision = Precision(spec.scale.precision, torch.device("cpu"))
    generator = torch.Generator().manual_seed(SEED)
    b = settings.batch
    batches = [
        objective.batch(list(range(i * b, (i + 1) * b)), generator) for i in range(settings.batches)
    ]

    def step(batch: Batch) -> torch.Tensor:
        with precision.autocast():
            loss: torch.Tensor = objective.loss(batch)
        precision.step(loss, optimizer, parameters, MAX_GRAD_NORM)
        scheduler.step()
        return loss.detach()

    notes = {
        "trainable": sum(p.numel() for p in parameters),
        "optimizer": type(optimizer).__name__,
        "optimizer_options": {
            k: v for k, v in optimizer.defaults.items() if k in ("foreach", "fused")
        },
        "precision": spec.scale.precision,
    }
    return Side("adaptlab", batches, step, model, notes, [], [], [])


def write_jsonl(path: Path, pairs: Sequence[Preference]) -> None:
    """`pairs` as a JSONL file, one record a line."""
    path.write_text("".join(json.dumps(record(p)) + "\n" for p in pairs))


def trl_side(pairs: Sequence[Preference], settings: Settings, folder: str) -> Side:
    """`DPOTrainer` + PEFT LoRA over `pairs` (in order), and its training loop's step."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    class Ordered(DPOTrainer):  # type: ignore[misc]
        """TRL's trainer, its dataloader handing out the pairs in order."""

        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            return list(range(len(self.train_dataset)))  # a sequence of indices is a sampler

    tokenizer = AutoTokenizer.from_pretrained(settings.model_folder)
    model = AutoModelForCausalLM.from_pretrained(settings.model_folder, dtype=torch.float32)
    config = trl_config(DPOConfig, folder, settings)
    trainer = Ordered(
        model=model,
        args=config,
        train_dataset=Dataset.from_list([record(p) for p in pairs]),
        processing_class=tokenizer,
        peft_config=peft_lora(),
    )
    if len(trainer.train_dataset) != len(pairs):
        raise SystemExit(f"TRL kept {len(trainer.train_dataset)} of {len(pairs)} pairs")
    trainer.create_optimizer_and_scheduler(num_training_steps=settings.batches)
    trainer.current_gradient_accumulation_steps = 1  # what its training loop sets
    batches = list(trainer.get_train_dataloader())[: settings.batches]
    peft_model = trainer.model
    optimizer, scheduler = trainer.optimizer, trainer.lr_scheduler

    def step(batch: Batch) -> torch.Tensor:
        loss: torch.Tensor = trainer.training_step(peft_model, batch)
        trainer.accelerator.clip_grad_norm_(peft_model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        scheduler.step()
        peft_model.zero_grad()
        return loss.detach()

    notes = {
        "trainable": sum(p.numel() for p in peft_model.parameters() if p.requires_grad),
        "optimizer": f"{type(optimizer).__name__} ({config.optim})",
        "changed_defaults": {
            "gradient_checkpointing": False,
            "bf16": False,
            "learning_rate": LEARNING_RATE,
        },
    }
    return Side("TRL", batches, step, peft_model, notes, [], [], [])


def trl_config(config_class: type, folder: str, settings: Settings | None) -> Any:
    """The `DPOConfig` of the TRL side: DPO's defaults (beta 0.1, the sigmoid loss, dropout
    off, the reference computed at each step) but fp32 without checkpointing, as adaptlab."""
    options: dict[str, Any] = dict(
        output_dir=folder,
        beta=BETA,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        gradient_checkpointing=False,
        bf16=False,
        use_cpu=True,
        disable_dropout=True,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        disable_tqdm=True,
        seed=SEED,
    )
    if settings is not None:
        options.update(per_device_train_batch_size=settings.batch, max_length=settings.max_length)
    return config_class(**options)


KEYS = ("input_ids", "attention_mask", "completion_mask")


def as_rows(batch: Batch) -> Batch:
    """A batch's sequences one a row, every chosen then every rejected one (TRL's layout; how
    `pair_logps` reads adaptlab's (pairs, 2, length) batch)."""
    return {
        key: batch[key].transpose(0, 1).flatten(0, 1) if batch[key].dim() == 3 else batch[key]
        for key in KEYS
    }


def as_pairs(rows: Batch) -> Batch:
    """Rows laid out as `as_rows` gives them, laid out as adaptlab's `collate_pairs` lays out a
    batch: (pairs, 2, length), each pair's chosen then its rejected sequence."""
    return {key: value.unflatten(0, (2, -1)).transpose(0, 1) for key, value in rows.items()}


def same_tokens(ours: Batch, theirs: Batch) -> dict[str, Any]:
    """Whether two batches hold the same rows in the same order: shapes, attention and answer
    masks, and the token ids where attended (the padding id may differ)."""
    mine, trl = as_rows(ours), as_rows(theirs)
    shape = tuple(mine["input_ids"].shape) == tuple(trl["input_ids"].shape)
    equal = shape and all(
        torch.equal(mine[key].long(), trl[key].long())
        for key in ("attention_mask", "completion_mask")
    )
    if equal:
        mask = mine["attention_mask"].bool()
        equal = torch.equal(mine["input_ids"][mask], trl["input_ids"][mask])
    return {
        "equal": bool(equal),
        "shape": list(mine["input_ids"].shape),
        "trl_shape": list(trl["input_ids"].shape),
        "tokens": int(mine["attention_mask"].sum()),
        "answer_tokens": int(mine["completion_mask"].sum()),
    }


def throughput(pairs: Sequence[Preference], settings: Settings) -> dict[str, Any]:
    """Both sides built, stepped interleaved, profiled; their measurements."""
    with tempfile.TemporaryDirectory() as folder:
        ours = adaptlab_side(pairs, settings)
        gc.collect()
        theirs = trl_side(pairs, settings, folder)
        sides = [ours, theirs]
        checks = [same_tokens(a, b) for a, b in zip(ours.batches, theirs.batches, strict=True)]
        for index in range(settings.warmup):
            for side in sides:
                side.run(index, timed=False)
        for round_ in range(settings.rounds):
            index = settings.warmup + round_
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                side.run(index, timed=True)
            print(
                f"  round {round_ + 1}/{settings.rounds}: "
                + ", ".join(f"{s.name} {s.seconds[-1]:.3f} s" for s in sides),
                flush=True,
            )
        last = settings.batches - 1
        for side in sides:
            gc.collect()
            side.profiled(last)
    results = [side_result(side, settings) for side in sides]
    return {
        "batches": checks,
        "same_tokens": sum(c["equal"] for c in checks),
        "results": results,
        "goals": goals(results[0], results[1]),
    }


def side_result(side: Side, settings: Settings) -> dict[str, Any]:
    """A side's figures: pairs per second from the median step, the profiled peak."""
    median = statistics.median(side.seconds)
    median_cpu = statistics.median(side.cpu_seconds)
    return {
        "side": side.name,
        "seconds_per_step": side.seconds,
        "cpu_seconds_per_step": side.cpu_seconds,
        "median_seconds": median,
        "median_cpu_seconds": median_cpu,
        "pairs_per_second": settings.batch / median,
        "pairs_per_cpu_second": settings.batch / median_cpu,
        "losses": side.losses,
        "peak_bytes": side.peak_bytes,
        **side.notes,
    }


def goals(ours: dict[str, Any], theirs: dict[str, Any]) -> list[dict[str, Any]]:
    """adaptlab against TRL: pairs per second (wall and CPU) and the step peak."""
    return [
        goal(
            "pairs/s vs TRL",
            ours["pairs_per_second"] / theirs["pairs_per_second"],
            ">=",
            GOAL_SPEED,
        ),
        goal(
            "pairs per CPU-second vs TRL",
            ours["pairs_per_cpu_second"] / theirs["pairs_per_cpu_second"],
            ">=",
            GOAL_SPEED,
        ),
        goal("step peak vs TRL", ours["peak_bytes"] / theirs["peak_bytes"], "<=", GOAL_PEAK),
    ]


# --- fake tensors -------------------------------------------------------------------------


class _ScalarsRead(OpMode):
    """A fake tensor's value read as a Python number (`.item()`, `bool()`) gives 0: TRL's
    `_compute_loss` reads its logged metrics that way, and no tensor's size depends on them."""

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default and isinstance(args[0], FakeTensor):
            dtype = args[0].dtype
            return False if dtype == torch.bool else 0.0 if dtype.is_floating_point else 0
        return func(*args, **kwargs)


def dpo_batch(ids: torch.Tensor, pairs: int) -> Batch:
    """`ids` (1, tokens) as `pairs` pairs in TRL's layout (`as_rows`): 2 * pairs rows of equal
    length, every token an answer token (see the module docstring), the last row's last position
    padding, so that the attention mask is built on real tensors as on fake ones (a real batch
    of pairs is padded)."""
    rows = ids.view(2 * pairs, -1)
    attended = torch.ones_like(rows)
    attended[-1, -1] = 0
    return {"input_ids": rows, "attention_mask": attended, "completion_mask": torch.ones_like(rows)}


def trl_stand_in(model: nn.Module) -> Any:
    """What `DPOTrainer._compute_loss` reads of its trainer, set as `DPOTrainer.__init__` sets it
    from the side's `DPOConfig`, with an accelerator of one CPU process."""
    from trl import DPOConfig

    with tempfile.TemporaryDirectory() as folder:
        args = trl_config(DPOConfig, folder, None)
    accelerator = types.SimpleNamespace(
        device=torch.device("cpu"),
        gather=lambda x: x,
        gather_for_metrics=lambda x: x,
        unwrap_model=lambda m: m,
    )
    return types.SimpleNamespace(
        model=model,
        ref_model=None,
        accelerator=accelerator,
        args=args,
        beta=args.beta,
        precompute_ref_logps=args.precompute_ref_log_probs,
        loss_types=args.loss_type,
        loss_weights=args.loss_weights or [1.0] * len(args.loss_type),
        ld_alpha=args.ld_alpha,
        f_divergence_type=args.f_divergence_type,
        f_alpha_divergence_coef=args.f_alpha_divergence_coef,
        label_smoothing=args.label_smoothing,
        use_weighting=args.use_weighting,
        aux_loss_enabled=False,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _total_train_tokens=0,
        _tp_size=1,
    )


def fake_setups(pairs: int) -> list[Setup]:
    """adaptlab's DPO step and TRL's, on `pairs` pairs made of the step's token ids: fp32
    without checkpointing (the measured SmolLM2 steps), and on a bf16 base with bf16 autocast
    and non-reentrant checkpointing (TRL's `DPOConfig` defaults; adaptlab's `--precision bf16
    --gradient-checkpointing`)."""

    def adaptlab_dpo(low: bool) -> Callable[[nn.Module, LiveBytes], Step]:
        def build(model: nn.Module, counter: LiveBytes) -> Step:
            from adaptlab.engine.precision import autocast_at, keep_trained_in_float32
            from adaptlab.engine.scale_model import prepare_base
            from adaptlab.methods.adapt import adapt
            from adaptlab.records.scale import Scale
            from adaptlab.runs.generative_evaluation import AnswerScoring
            from adaptlab.runs.preference_objective import PreferenceLm
            from adaptlab.runs.preference_run import switch_off_dropout
            from adaptlab.tasks.dpo import DPO
            from adaptlab.tasks.preference_settings import PreferenceSettings

            precision = "bf16" if low else "fp32"
            scale = Scale(precision, precision, gradient_checkpointing=low)
            prepare_base(model, scale, torch.device("cpu"))
            lora = {"rank": RANK, "alpha": float(ALPHA), "targets": ALL_LINEAR}
            adapt(model, {"lora": lora}, train_head=False, keep_initial=False)
            keep_trained_in_float32(model)
            switch_off_dropout(model)
            settings = PreferenceSettings.of({"task": "dpo", "beta": BETA}, DPO)
            tokenizer: Any = types.SimpleNamespace(pad_token_id=0)
            scoring = AnswerScoring("", None, 1)  # type: ignore[arg-type]  # no dev scoring
            objective = PreferenceLm(
                model,
                tokenizer,
                DPO,
                settings,
                (),
                None,
                scoring,  # type: ignore[arg-type]
            )

            def step(ids: torch.Tensor) -> None:
                with autocast_at(precision, ids.device):  # as the loop runs the loss
                    loss = objective.loss(as_pairs(dpo_batch(ids, pairs)))
                loss.backward()

            return step

        return build

    def trl_dpo(low: bool) -> Callable[[nn.Module, LiveBytes], Step]:
        def build(model: nn.Module, counter: LiveBytes) -> Step:
            from peft import get_peft_model
            from trl import DPOTrainer
            from trl.trainer.utils import add_fused_lm_head, disable_dropout_in_model

            if low:  # the model loaded in bf16, as from a bf16 checkpoint with dtype "auto"
                model.to(torch.bfloat16)
            adapted = get_peft_model(model, peft_lora())  # as DPOTrainer.__init__, in this order
            if low:
                adapted.enable_input_require_grads()  # DPOTrainer, with PEFT and checkpointing
            disable_dropout_in_model(adapted)
            add_fused_lm_head(adapted.get_base_model(), outputs=TRL_OUTPUTS)
            if low:  # Trainer.train, with transformers' default kwargs (non-reentrant)
                adapted.gradient_checkpointing_enable()
            trainer = trl_stand_in(adapted)
            autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=low)  # bf16=True

            def step(ids: torch.Tensor) -> None:
                batch = dpo_batch(ids, pairs)
                with _ScalarsRead(), autocast:
                    loss = DPOTrainer._compute_loss(trainer, adapted, batch, False)
                loss.backward()

            return step

        return build

    ours = (
        "adaptlab.methods.adapt",
        "adaptlab.engine.checkpointing",
        "adaptlab.engine.scale_model",
        "adaptlab.runs.preference_objective",
        "adaptlab.runs.preference_run",
        "adaptlab.tasks.dpo",
    )
    theirs = ("peft", "trl", "trl.trainer.utils", "trl.trainer.dpo_trainer")
    low = "bf16 + ckpt"
    return [
        Setup("adaptlab", "adaptlab PreferenceLm.loss", adaptlab_dpo(False), ours),
        Setup("trl", "TRL DPOTrainer._compute_loss", trl_dpo(False), theirs),
        Setup("adaptlab-bf16", f"adaptlab, {low}", adaptlab_dpo(True), ours),
        Setup("trl-bf16", f"TRL, {low} (DPOConfig defaults)", trl_dpo(True), theirs),
    ]


def fake_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Fake-tensor peaks on the large shape, and the real / fake check on the small one."""
    tokens = 2 * args.fake_pairs * args.fake_length
    check_tokens = 2 * args.fake_pairs * args.check_length
    setups = fake_setups(args.fake_pairs)
    with _quiet():
        rows, checks = fake_peaks(setups, args.fake_shape, tokens, args.check_shape, check_tokens)
    return {
        "shape": args.fake_shape,
        "shape_config": SHAPES[args.fake_shape],
        "pairs": args.fake_pairs,
        "length": args.fake_length,
        "tokens": tokens,
        "labels": {setup.key: setup.label for setup in setups},
        "rows": rows,
        "check_shape": args.check_shape,
        "check_length": args.check_length,
        "checks": checks,
    }


def _above(row: dict[str, Any]) -> int:
    """A fake-tensor row's peak above what was live as its step began (weights, LoRA, AdamW's
    state): what the step itself adds."""
    return int(row["peak_bytes"] - row["start_bytes"])


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """TRL's and PEFT's notices, printed per model, are not what is measured."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- report -------------------------------------------------------------------------------


def format_report(report: dict[str, Any]) -> str:
    """The throughput table, the goals, the fake-tensor table and its checks."""
    s = report["settings"]
    lines = []
    measured = report["throughput"]
    if measured:
        ours = measured["results"][0]
        shapes = sorted({tuple(b["shape"]) for b in measured["batches"]})
        lines += [
            f"{s['model']}, LoRA r={RANK} (alpha {ALPHA}) on every linear layer, fp32, "
            f"{s['threads']} thread(s), batch {s['batch']} pairs of {CORPUS}, beta {BETA}",
            f"{s['warmup']} warm-up + {s['rounds']} interleaved timed rounds + 1 profiled step "
            f"a side; same tokens on both sides in {measured['same_tokens']} of "
            f"{len(measured['batches'])} batches (rows x positions: "
            f"{', '.join('x'.join(map(str, sh)) for sh in shapes)})",
        ]
        head = (
            f"{'side':9} {'median s':>9} {'pairs/s':>8} {'CPU s':>7} {'pairs/CPU s':>11} "
            f"{'peak MB':>8} {'ratio pairs/s':>13} {'per CPU s':>9} {'peak':>6}"
        )
        lines += [head, "-" * len(head)]
        for r in measured["results"]:
            lines.append(
                f"{r['side']:9} {r['median_seconds']:9.3f} {r['pairs_per_second']:8.2f} "
                f"{r['median_cpu_seconds']:7.3f} {r['pairs_per_cpu_second']:11.2f} "
                f"{r['peak_bytes'] / MB:8.1f} "
                f"{ours['pairs_per_second'] / r['pairs_per_second']:13.2f} "
                f"{ours['pairs_per_cpu_second'] / r['pairs_per_cpu_second']:9.2f} "
                f"{ours['peak_bytes'] / r['peak_bytes']:6.2f}"
            )
        first = [r["losses"][0] for r in measured["results"]]
        lines.append(f"first-step loss: adaptlab {first[0]:.6f}, TRL {first[1]:.6f}")
        lines.append("goals (measured, not asserted):")
        for g in measured["goals"]:
            verdict = "PASS" if g["pass"] else "FAIL"
            lines.append(
                f"  {verdict}  {g['goal']}: {g['value']:.2f} (goal {g['op']} {g['limit']})"
            )
    memory = report["fake_memory"]
    if memory:
        lines.append(
            f"\npeak live tensor GiB of one DPO AdamW step, {memory['shape']} shape, "
            f"{memory['pairs']} pairs x {memory['length']} tokens ({2 * memory['pairs']} rows), "
            "fake tensors, weights included; fp32 unless marked:"
        )
        rows = {row["setup"]: row for row in memory["rows"]}
        lines.append(
            f"  {'setup':42} {'peak':>7} {'above start':>11}   adaptlab / TRL: peak, above start"
        )
        for key, row in rows.items():
            peer = rows.get(key.replace("adaptlab", "trl"))
            ratio = ""
            if key.startswith("adaptlab") and peer is not None:
                ratio = (
                    f"   {row['peak_bytes'] / peer['peak_bytes']:.3f}, "
                    f"{_above(row) / _above(peer):.3f}"
                )
            lines.append(
                f"  {memory['labels'][key]:42} {row['peak_bytes'] / GIB:7.3f} "
                f"{_above(row) / GIB:11.3f}{ratio}"
            )
        where = f"{memory['check_shape']} @{memory['pairs']}x{memory['check_length']}"
        lines += check_lines(memory["checks"], where)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = command_line(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, help="pairs a step (default 8; --quick 2)")
    parser.add_argument("--steps", type=int, help="timed rounds, a step a side (20; --quick 2)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps a side first")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument(
        "--quick", action="store_true", help="batch 2, 2 rounds, the fake part on the tiny shape"
    )
    parser.add_argument("--no-throughput", dest="throughput", action="store_false")
    parser.add_argument(
        "--fake-shape", help="tinyllama-1.1b (--quick: tiny); '' skips the fake part"
    )
    parser.add_argument("--fake-pairs", type=int, default=2)
    parser.add_argument("--fake-length", type=int, help="tokens a row (512; --quick 32)")
    parser.add_argument("--check-shape", default="tiny")
    parser.add_argument("--check-length", type=int, default=32)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    quick = {"batch_size": 2, "steps": 2, "fake_shape": "tiny", "fake_length": 32}
    full = {"batch_size": 8, "steps": 20, "fake_shape": "tinyllama-1.1b", "fake_length": 512}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    check_shapes(parser, (args.fake_shape, args.check_shape), SHAPES)
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--batch-size and --steps must be >= 1, --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure, print the report, write the JSON."""
    args = parse_args(argv)
    started = start(args.threads)
    settings = Settings.of(args, args.batch_size, warmup=args.warmup, rounds=args.steps)
    measured: dict[str, Any] = {}
    if args.throughput:
        pairs = select_pairs(settings.batches * settings.batch)
        print(f"{CORPUS}: {len(pairs)} pairs, {settings.batches} batches a side", flush=True)
        measured = throughput(pairs, settings)
    memory: dict[str, Any] = {}
    if args.fake_shape:
        print("step memory (fake tensors):", flush=True)
        memory = fake_memory(args)
    report: dict[str, Any] = {
        **heading("dpo_throughput"),
        "settings": {
            "model": args.model,
            "corpus": CORPUS,
            "max_length": args.max_length,
            "batch": args.batch_size,
            "warmup": args.warmup,
            "rounds": args.steps,
            "beta": BETA,
            "loss": "sigmoid",
            "reference": "the policy with its adapter off, computed at each step",
            "lora": LORA_SETTINGS,
            "learning_rate": LEARNING_RATE,
            "weight_decay": WEIGHT_DECAY,
            "max_grad_norm": MAX_GRAD_NORM,
            "precision": "fp32",
            "gradient_checkpointing": False,
            "threads": torch.get_num_threads(),
        },
        "environment": versions("torch", "transformers", "trl", "peft", "adaptlab"),
        "throughput": measured,
        "fake_memory": memory,
        "wall_seconds": time.monotonic() - started,
    }
    write_report(report, format_report(report), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
