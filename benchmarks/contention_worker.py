"""One step loop of `contention.py`, in this fresh process: its threads set first (before torch
loads), then warm-up steps, then as many steps as fit in the window; steps per second go to a
JSON file.

Settings:
- ``adaptlab``: `adaptlab.share_cpus(training=True)`, what `adaptlab train`, `sequence` and
  `study` do as they start, and the thread governor's tick after each step, as adaptlab's
  training loop runs it (`adaptlab.engine.thread_governor`);
- ``default``: torch's own (the caller leaves no OpenMP variable set): how adaptlab ran before,
  and how a plain PyTorch loop or TRL runs;
- ``one-thread``: `OMP_NUM_THREADS=1` by hand (set by the caller).

Workloads (real models from the offline packages):
- ``houlsby``: MiniLM-L6 (`minilm-l6`) with adaptlab's Houlsby adapter (m = 64), sequence
  classification, batch 16 x 64 tokens, AdamW 1e-3;
- ``lora-sft``: SmolLM2-135M (`smollm2-135m`) with adaptlab's LoRA (r = 8), next-token loss,
  batch 8 x 64 tokens (about the length of a countries-qa example), AdamW 2e-4;
- ``plain``: a plain PyTorch loop, six linear layers of 576, batch 64, AdamW;
- ``trl``: TRL's `SFTTrainer` + PEFT LoRA (r = 8 on q_proj and v_proj, adaptlab's LoRA
  targets), SmolLM2-135M, 64 texts cut to 64 tokens, batch 8, otherwise TRL's defaults on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WARMUP = 2
MIN_STEPS = 3


def apply(settings: str) -> None:
    """Set the threads as `settings` says, before torch loads."""
    if settings == "adaptlab":
        import adaptlab

        adaptlab.share_cpus(training=True)


def houlsby() -> Callable[[], None]:
    from transformers import AutoModelForSequenceClassification

    import adaptlab
    from adaptlab.models.resolve import resolve_model

    folder = resolve_model("minilm-l6").location
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2)
    adaptlab.adapt(model, "houlsby")
    return _loop(model, _tokens(model.config.vocab_size, 16, 64, classes=2), 1e-3)


def lora_sft() -> Callable[[], None]:
    import torch
    from transformers import AutoModelForCausalLM

    import adaptlab
    from adaptlab.models.resolve import resolve_model

    folder = resolve_model("smollm2-135m").location
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    adaptlab.adapt(model, "lora")
    return _loop(model, _tokens(model.config.vocab_size, 8, 64), 2e-4)


def plain() -> Callable[[], None]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(576, 576) for _ in range(6)])
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    inputs = torch.randn(64, 576)

    def step() -> None:
        model(inputs).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def _tokens(vocabulary: int, rows: int, length: int, classes: int = 0) -> dict[str, Any]:
    """Random token ids, a full mask, and labels: a class per row, or the ids themselves."""
    import torch

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocabulary, (rows, length), generator=generator)
    labels = torch.randint(0, classes, (rows,), generator=generator) if classes else ids
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def _loop(model: Any, batch: dict[str, Any], learning_rate: float) -> Callable[[], None]:
    """One AdamW step over `batch` of the model's trainable parameters, as a callable."""
    import torch

    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, learning_rate)

    def step() -> None:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def measure(step: Callable[[], None], seconds: float) -> dict[str, Any]:
    """Warm-up steps, then steps until `seconds` have passed (at least MIN_STEPS), each
    followed by the thread governor's tick (which does nothing unless adaptlab chose the
    threads)."""
    from adaptlab.engine.thread_governor import ThreadGovernor

    with ThreadGovernor() as governor:
        for done in range(WARMUP):
            step()
            governor.tick(done)
        began, cpu_began, count = time.perf_counter(), time.process_time(), 0
        fewer = 0
        while count < MIN_STEPS or time.perf_counter() - began < seconds:
            step()
            count += 1
            governor.tick(WARMUP + count)
            fewer += torch_threads() < governor.chosen
        spent = time.perf_counter() - began, time.process_time() - cpu_began
    return _result(count, *spent) | {"steps_on_fewer_threads": fewer}


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def trl(seconds: float) -> dict[str, Any]:
    """TRL's `SFTTrainer` stepping until the window has passed, timed by a callback."""
    import tempfile

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from adaptlab.models.resolve import resolve_model

    folder = resolve_model("smollm2-135m").location
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    words = " ".join(f"word{i}" for i in range(400))
    texts = Dataset.from_list([{"text": f"{i} {words}"} for i in range(64)])
    ends: list[float] = []
    cpu: list[float] = []

    class Window(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ends.append(time.perf_counter())
            cpu.append(time.process_time())
            timed = len(ends) - WARMUP
            if timed >= MIN_STEPS and ends[-1] - ends[WARMUP - 1] >= seconds:
                control.should_training_stop = True

    with tempfile.TemporaryDirectory() as out:
        config = SFTConfig(
            output_dir=out,
            max_length=64,
            per_device_train_batch_size=8,
            max_steps=100_000,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        lora = LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=texts,
            processing_class=tokenizer,
            peft_config=lora,
            callbacks=[Window()],
        )
        trainer.train()
    first = WARMUP - 1
    return _result(len(ends) - WARMUP, ends[-1] - ends[first], cpu[-1] - cpu[first])


def _result(steps: int, seconds: float, cpu_seconds: float) -> dict[str, Any]:
    return {
        "steps": steps,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "steps_per_second": steps / seconds,
        "threads": torch_threads(),
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
    }


WORKLOADS: dict[str, Callable[[], Callable[[], None]]] = {
    "houlsby": houlsby,
    "lora-sft": lora_sft,
    "plain": plain,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", choices=[*WORKLOADS, "trl"], required=True)
    parser.add_argument("--settings", choices=["adaptlab", "default", "one-thread"])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    apply(args.settings)
    if args.workload == "trl":
        result = trl(args.seconds)
    else:
        result = measure(WORKLOADS[args.workload](), args.seconds)
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
