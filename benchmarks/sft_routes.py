"""The two routes `sft_throughput.py` compares, on the same examples in the same order.

- adaptlab: the examples written as a data folder and trained as `adaptlab train --task sft|chat
  --pack` trains them: the task's preparer (`prepare_run`: data read and encoded, model
  loaded, LoRA attached, `GenerativeLm` packing the examples into rows) and the one epoch loop
  (`train_epochs`), one epoch of exactly the steps measured.
- TRL: `SFTTrainer` + PEFT on the same examples (prompt / completion columns or `messages`),
  packing on or off. Its sampler is made to hand out the rows (packed) or the examples
  (padded) in the order adaptlab's loop drew them, when the rows can be matched.

Both report each step through a `StepMeter`: the end of every optimizer step, each step's
target tokens (the labels after a row's first position that are not ignored: what the loss is
the mean over, on both sides), and the live-tensor peak of the last step, counted from the
profiler's allocation records as `step_memory.py` counts it.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from step_memory import events_peak
from torch.profiler import ProfilerActivity, profile
from trl_comparison import ALL_LINEAR, ALPHA, RANK, SEED, SharedSettings, peft_lora

from adaptlab.data.generative import Conversation, GenerativeExample, PromptCompletion
from adaptlab.data.generative_encoding import EncodedExample, GenerativeEncoder
from adaptlab.data.generative_loading import load_generative
from adaptlab.engine.events import observing
from adaptlab.engine.loop import train_epochs
from adaptlab.engine.packing import pack, target_tokens
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.preparers import prepare_run
from adaptlab.tasks.registry import LABELLED, run_task

LEARNING_RATE = 2e-4

CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2-135M-Instruct's chat template, character for character (chats render with it on
both sides, whatever the model, so that a test model renders them the same way)."""
CHATML_TRAINING = CHATML.replace(
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}",
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}{% generation %}"
    "{{ message['content'] + '<|im_end|>' + '\n' }}{% endgeneration %}{% else %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endif %}",
)
"""The same template with TRL's `{% generation %}` markers around each assistant turn (content,
end-of-turn token and newline: the tokens adaptlab's chat encoding makes targets). TRL's
`assistant_only_loss` needs them and cannot add them to this template itself."""
assert CHATML_TRAINING != CHATML

CORPORA: dict[str, tuple[str, str]] = {
    "countries-qa": ("sft", "prompt-completion"),
    "friends-chat": ("chat", "messages"),
}
"""The built-in corpora measured: adaptlab's task and the data's shape."""


@dataclass(frozen=True)
class Settings(SharedSettings):
    """What both routes share: the model, the length, the batch, the steps."""

    timed_steps: int

    @property
    def steps(self) -> int:
        """Optimizer steps each route runs: a warm-up, the timed ones, the profiled one."""
        return self.timed_steps + 2


@dataclass(frozen=True)
class Workload:
    """A corpus's first training examples that fit `max_length` uncut, as many as adaptlab
    packs into exactly the rows of the measured steps."""

    corpus: str
    task: str
    examples: tuple[GenerativeExample, ...]
    encoded: tuple[EncodedExample, ...]
    rows: list[list[int]]


def select(corpus: str, tokenizer: Any, settings: Settings) -> Workload:
    """The longest run of `corpus`'s first training examples (those whose encoding is shorter
    than max_length, so cut by neither side) that packs into `steps * batch` rows."""
    task, shape = CORPORA[corpus]
    template = CHATML if shape == "messages" else None
    encoder = GenerativeEncoder(tokenizer, settings.max_length, chat_template=template)
    wanted = settings.steps * settings.batch
    examples: list[GenerativeExample] = []
    encoded: list[EncodedExample] = []
    rows: list[list[int]] = []
    for example in load_generative(corpus, LABELLED, shape=shape).splits["train"]:
        one = encoder.encode(example)
        if one is None or len(one.input_ids) >= settings.max_length:
            continue
        packed = pack([len(e.input_ids) for e in (*encoded, one)], settings.max_length)
        if len(packed) > wanted:
            break
        examples.append(example)
        encoded.append(one)
        rows = packed
    if len(rows) != wanted:
        raise SystemExit(f"{corpus}: its training split fills {len(rows)} rows, not {wanted}")
    return Workload(corpus, task, tuple(examples), tuple(encoded), rows)


def record(example: GenerativeExample) -> dict[str, Any]:
    """An example as a JSONL record (adaptlab's data folder) and a dataset row (TRL)."""
    if isinstance(example, PromptCompletion):
        return {"prompt": example.prompt, "completion": example.completion}
    assert isinstance(example, Conversation)
    return {"messages": [{"role": t.role, "content": t.content} for t in example.turns]}


class StepMeter:
    """Step ends, each step's batch, and the live-tensor peak of the last step of a training
    of `steps` optimizer steps (the one before it ends the timed ones)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.ends: list[float] = []
        self.cpu_ends: list[float] = []
        self.targets: list[int] = []
        self.positions: list[int] = []
        self.examples: list[int] = []
        self.rows: list[list[list[int]]] = []
        """adaptlab only: each step's rows, as lists of example indices."""
        self.peak_bytes: int | None = None
        self._profiler: profile | None = None

    def batch(self, batch: Mapping[str, torch.Tensor], examples: int) -> None:
        """A step's batch of `examples` examples, as the model is about to read it."""
        self.targets.append(target_tokens(dict(batch)))
        self.positions.append(batch["input_ids"].numel())
        self.examples.append(examples)

    def step_ended(self, step: int) -> None:
        """Optimizer step `step` (1-based) ended."""
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())
        if step == self.steps - 1:
            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profiler.start()
        elif step == self.steps and self._profiler is not None:
            self._profiler.stop()
            self.peak_bytes = events_peak(self._profiler)
            self._profiler = None

    def on_step(self, title: str, step: int, loss: float, learning_rate: float) -> None:
        """adaptlab's loop: a step ended (`TrainingObserver`)."""
        self.step_ended(step)

    def on_epoch(self, title: str, record: Any, metric: str) -> None:
        """adaptlab's loop: the epoch was scored (`TrainingObserver`)."""

    def result(self, label: str, **extra: Any) -> dict[str, Any]:
        """The measurement: the timed steps' target tokens over their seconds."""
        if len(self.ends) != self.steps or self.peak_bytes is None:
            raise SystemExit(f"{label}: ran {len(self.ends)} steps, not {self.steps}")
        timed = slice(1, self.steps - 1)
        tokens = sum(self.targets[timed])
        seconds = self.ends[-2] - self.ends[0]
        cpu_seconds = self.cpu_ends[-2] - self.cpu_ends[0]
        return {
            "route": label,
            "steps": self.steps,
            "timed_steps": self.steps - 2,
            "target_tokens_per_step": self.targets,
            "positions_per_step": self.positions,
            "examples_per_step": self.examples,
            "examples": sum(self.examples),
            "timed_examples": sum(self.examples[timed]),
            "seconds_per_step": _gaps(self.ends),
            "cpu_seconds_per_step": _gaps(self.cpu_ends),
            "timed_target_tokens": tokens,
            "timed_seconds": seconds,
            "timed_cpu_seconds": cpu_seconds,
            "target_tokens_per_second": tokens / seconds,
            "target_tokens_per_cpu_second": tokens / cpu_seconds,
            "peak_bytes": self.peak_bytes,
            **extra,
        }


def _gaps(ends: Sequence[float]) -> list[float]:
    """The time between consecutive step ends (the first step's start is not recorded)."""
    return [b - a for a, b in zip(ends, ends[1:], strict=False)]


def adaptlab_route(workload: Workload, settings: Settings) -> dict[str, Any]:
    """`adaptlab train --task sft|chat --pack` over the workload, measured."""
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        write_jsonl(data / "train.jsonl", workload.examples)
        for split in ("dev", "test"):  # one example: scored after the measured steps
            write_jsonl(data / f"{split}.jsonl", workload.examples[:1])
        options: dict[str, Any] = {"task": workload.task, "pack": True, "max_new_tokens": 1}
        if workload.task == "chat":
            template = data / "chatml.jinja"
            template.write_text(CHATML)
            options["chat_template"] = str(template)
        train = TrainConfig(
            epochs=1,
            batch_size=settings.batch,
            learning_rate=LEARNING_RATE,
            max_length=settings.max_length,
            eval_batch_size=settings.batch,
            seed=SEED,
        )
        lora = {"rank": RANK, "alpha": ALPHA, "targets": ALL_LINEAR}
        spec = RunSpec.build(
            settings.model,
            str(data),
            {"lora": lora},
            train=train,
            data_options=options,
            device="cpu",
        )
        objective = prepare_run(run_task(spec.task), spec, torch.device("cpu"))
        if tuple(objective.train_examples) != workload.encoded or objective.rows != workload.rows:
            raise SystemExit(f"{workload.corpus}: adaptlab's run encoded other examples")
        meter = StepMeter(settings.steps)
        make_batch = objective.batch

        def batch(indices: list[int], generator: torch.Generator) -> dict[str, torch.Tensor]:
            made: dict[str, torch.Tensor] = make_batch(indices, generator)
            rows = [objective.rows[i] for i in indices]
            meter.rows.append(rows)
            meter.batch(made, sum(len(row) for row in rows))
            return made

        objective.batch = batch  # this objective's batches, seen as the loop makes them
        with observing(meter):
            train_epochs(
                objective.model,
                objective,
                spec.train,
                spec.learning_rate(),
                scale=spec.scale,
                progress=False,
            )
    return meter.result("adaptlab", packing=True, order=meter.rows)


def write_jsonl(path: Path, examples: Sequence[GenerativeExample]) -> None:
    """`examples` as a JSONL file, one record a line."""
    path.write_text("".join(json.dumps(record(e)) + "\n" for e in examples))


def trl_route(
    workload: Workload, settings: Settings, packing: bool, order: list[list[list[int]]]
) -> dict[str, Any]:
    """`SFTTrainer` + PEFT LoRA over the workload, packed or padded, in adaptlab's order
    (`order`: adaptlab's rows, step by step), measured."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    meter = StepMeter(settings.steps)

    class Metered(SFTTrainer):  # type: ignore[misc]
        """TRL's trainer, its batches seen and its examples drawn in a given order."""

        order: list[int] | None = None

        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            if self.order is None:
                return super()._get_train_sampler(train_dataset)
            return list(self.order)  # a sequence of indices is a sampler

        def training_step(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            flat = "position_ids" in inputs  # padding-free: one row of every example
            examples = int(inputs["position_ids"].eq(0).sum()) if flat else len(inputs["labels"])
            meter.batch(inputs, examples)
            return super().training_step(model, inputs, *args, **kwargs)

    class Steps(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            meter.step_ended(state.global_step)

    chat = workload.task == "chat"
    tokenizer = AutoTokenizer.from_pretrained(settings.model_folder)
    if chat:
        tokenizer.chat_template = CHATML_TRAINING
    model = AutoModelForCausalLM.from_pretrained(settings.model_folder, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as folder:
        config = SFTConfig(
            output_dir=folder,
            packing=packing,
            max_length=settings.max_length,
            per_device_train_batch_size=settings.batch,
            gradient_accumulation_steps=1,
            max_steps=settings.steps,
            learning_rate=LEARNING_RATE,
            weight_decay=0.01,
            max_grad_norm=1.0,
            completion_only_loss=None if chat else True,
            assistant_only_loss=chat,
            gradient_checkpointing=False,
            bf16=False,
            use_cpu=True,
            report_to=[],
            eval_strategy="no",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            seed=SEED,
        )
        trainer = Metered(
            model=model,
            args=config,
            train_dataset=Dataset.from_list([record(e) for e in workload.examples]),
            processing_class=tokenizer,
            peft_config=peft_lora(),
            callbacks=[Steps()],
        )
        prepared = trainer.train_dataset
        same = same_encoding(prepared, workload) if not packing else None
        trainer.order = trl_order(prepared, workload, order, packing)
        trainer.train()
        optimizer = type(trainer.optimizer.optimizer).__name__
    return meter.result(
        f"TRL {'packed' if packing else 'padded'}",
        packing=packing,
        same_order=trainer.order is not None,
        same_encoding=same,
        optimizer=optimizer,
    )


def same_encoding(prepared: Any, workload: Workload) -> int:
    """How many of TRL's tokenised examples hold adaptlab's ids and labels, one for one."""
    if len(prepared) != len(workload.encoded):
        return 0
    return sum(
        tuple(row["input_ids"]) == e.input_ids and tuple(row["labels"]) == e.labels
        for row, e in zip(prepared, workload.encoded, strict=True)
    )


def trl_order(
    prepared: Any, workload: Workload, order: list[list[list[int]]], packing: bool
) -> list[int] | None:
    """TRL's dataset indices in the order adaptlab trained: its examples (padded), or its
    packed rows matched to adaptlab's by the token ids of their examples; None when TRL's rows
    are not adaptlab's (TRL then draws its own order)."""
    trained = [row for step in order for row in step]
    if not packing:
        return [index for row in trained for index in row]
    ids = [e.input_ids for e in workload.encoded]
    mine = [tuple(sorted(ids[i] for i in row)) for row in trained]
    theirs: dict[tuple[tuple[int, ...], ...], list[int]] = {}
    for index, row in enumerate(prepared):
        theirs.setdefault(_segments(row), []).append(index)
    if Counter(mine) != Counter({key: len(v) for key, v in theirs.items()}):
        return None
    return [theirs[key].pop() for key in mine]


def _segments(row: Mapping[str, Any]) -> tuple[tuple[int, ...], ...]:
    """A TRL packed row's examples' token ids, sorted."""
    out, start = [], 0
    for length in row["seq_lengths"]:
        out.append(tuple(row["input_ids"][start : start + length]))
        start += length
    return tuple(sorted(out))
