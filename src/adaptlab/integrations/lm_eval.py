"""Score any adaptlab adapter, or a bare base model, with EleutherAI's lm-evaluation-harness.

The model is rebuilt as `adaptlab eval` rebuilds it (any method, a Stack, a Fuse, the adapters
a folder was saved with) and handed to lm-eval's `HFLM` as a model object with its tokenizer
(`score_model`, which a study also calls on each model it has just trained), so adapters PEFT
cannot represent are scored like any Hugging Face model; `simple_evaluate` runs lm-eval's tasks
(built-in ones and a folder of the user's own task YAML), and the results are written in
lm-eval's own layout (`adaptlab.integrations.lm_eval_results`).

    from adaptlab.integrations.lm_eval import evaluate
    scored = evaluate("runs/qa-lora", ["arc_easy"], limit=100)
    scored.results["results"]["arc_easy"]["acc,none"]
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn
from transformers import AutoConfig, PreTrainedTokenizerBase

from adaptlab.checks import at_least, positive
from adaptlab.engine.outputs import ADAPTER_FOLDER, HARNESS_FOLDER, is_run_folder
from adaptlab.engine.restore import load_trained
from adaptlab.engine.stack_swap import stack_swapped
from adaptlab.errors import AdapterFileError, ConfigError, one_line
from adaptlab.integrations.lm_eval_results import (
    check_results_folder,
    results_document,
    write_results,
)
from adaptlab.integrations.lm_eval_yaml import task_folders, unparsed_task_file
from adaptlab.methods.manifest import adapter_folder
from adaptlab.models.decoder import is_encoder
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel, ModelKind, load_model
from adaptlab.models.quantize import check_quantize_kind, quantize_base
from adaptlab.models.quiet import quiet_transformers
from adaptlab.models.resolve import load_errors, resolve_model
from adaptlab.paths import existing
from adaptlab.quiet_logs import errors_only
from adaptlab.records.transfer import Swap
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import get_task

INSTALL = "{} needs lm-evaluation-harness: pip install 'adaptlab[harness]'"
"""The refusal when lm-eval is not installed, naming what asked for it."""
LANGUAGE_MODELS: tuple[ModelKind, ...] = ("causal_lm", "seq2seq_lm")
"""The model kinds lm-eval scores: it reads log-likelihoods and generations of text."""
_HEADS = {
    "single_label": "sequence-classification",
    "multi_label": "sequence-classification",
    "regression": "sequence-classification (regression)",
    "token": "token-classification",
    "masked_lm": "masked-LM",
}
"""The head of each other kind's model, for the refusal."""


@dataclass(frozen=True)
class HarnessResults:
    """lm-eval's results dict (what `simple_evaluate` returns) and the file it was written
    to (None: not written, for a base model scored without `out`)."""

    results: dict[str, Any]
    written: Path | None


@dataclass(frozen=True)
class HarnessTasks:
    """lm-eval tasks built with their data loaded (`load_tasks`), to score one model on:
    `items` as `simple_evaluate` takes them, from the task index `manager`."""

    items: list[Any]
    manager: Any


@dataclass(frozen=True)
class ModelScores:
    """What `score_model` found: lm-eval's results dict (what `simple_evaluate` returns) and
    the document lm-eval writes of it (`lm_eval_results.results_document`)."""

    results: dict[str, Any]
    document: dict[str, Any]


def evaluate(
    adapter: str | os.PathLike[str] | None,
    tasks: str | Sequence[str],
    *,
    model: str | None = None,
    include: str | os.PathLike[str] | None = None,
    num_fewshot: int | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    out: str | os.PathLike[str] | None = None,
    stack_swaps: Sequence[Swap] = (),
    log_samples: bool = False,
    builtin_tasks: bool = True,
    quantize: str | None = None,
) -> HarnessResults:
    """Score `adapter` (an adapter or run folder; None: the base `model` alone) on lm-eval's
    `tasks` (names, or one comma-separated text) and write the results as lm-eval does, to
    `out` or, by default, `lm_eval/` in the run folder (the adapter folder for an adapter
    outside a run; a base model alone is written only to `out`).

    `model`: the base to load the adapter onto (default: the one its manifest names).
    `include`: a folder of the user's task YAML files (lm-eval's `include_path`).
    `num_fewshot`, `limit`: as lm-eval's (examples in context; examples scored per task).
    `stack_swaps`: (name, folder) pairs run in place of adapters of the Stack (MAD-X).
    `log_samples`: keep every example's record in `results["samples"]` (never written).
    `builtin_tasks`: False indexes only `include`'s tasks, not lm-eval's thousands.
    `quantize` (nf4, int8): score on a quantised base, as a QLoRA adapter was trained.
    Everything is checked before the model loads; nothing is written when a check fails.
    """
    require_lm_eval()
    names = task_names(tasks)
    if num_fewshot is not None:
        at_least(num_fewshot, 0, "--num-fewshot")
    if limit is not None:
        positive(limit, "--limit")
    positive(batch_size, "--batch-size")
    if quantize is not None:
        check_quantize_kind(quantize, "--quantize")
    include_dir = _include_folder(include)
    folder = None if adapter is None else adapter_folder(adapter)
    if folder is not None:
        check_language_model(folder)
    elif model is None:
        raise ConfigError("give an adapter or run folder to score, or a base --model alone")
    base_kind = _base_kind(model) if folder is None and model is not None else None
    inputs = existing([(include_dir, "task folder"), (model, "base model")])
    inputs += existing([(path, "stacked adapter") for _, path in stack_swaps])
    results_folder = _results_folder(folder, out, inputs)
    loaded_tasks = load_tasks(task_manager(include_dir, builtin_tasks), names)
    loaded, described = _load(folder, model, base_kind, device, quantize)
    with stack_swapped(loaded.model, stack_swaps):
        scored = score_model(
            loaded.model, loaded.tokenizer, loaded_tasks, num_fewshot=num_fewshot, limit=limit,
            batch_size=batch_size, described=described, log_samples=log_samples,
        )  # fmt: skip
    written = None
    if results_folder is not None:
        written = write_results(results_folder, scored.document)
    return HarnessResults(results=scored.results, written=written)


def score_model(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    tasks: HarnessTasks,
    *,
    num_fewshot: int | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    described: dict[str, Any] | None = None,
    log_samples: bool = False,
) -> ModelScores:
    """lm-eval's `simple_evaluate` of `model` (built and on its device, adapters running) on
    `tasks`, handed to lm-eval's `HFLM` as a model object with its `tokenizer`; `described`:
    how lm-eval's records name the model (its `model_args`). `tasks` are used up: load them
    anew (`load_tasks`) for another model."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.models.huggingface import HFLM

    # lm-eval's `hf` model warns that a model object was passed, so its loading options are
    # ignored: that is what is meant here
    with errors_only("lm_eval.models.huggingface"):
        lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    tracker = EvaluationTracker()
    results = simple_evaluate(
        model=lm,
        model_args=described or {},
        tasks=tasks.items,
        num_fewshot=num_fewshot,
        limit=limit,
        batch_size=batch_size,
        device=str(lm.device),
        log_samples=log_samples,
        evaluation_tracker=tracker,
        task_manager=tasks.manager,
    )
    return ModelScores(results=results, document=results_document(results, tracker))


def require_lm_eval(asker: str = "adaptlab eval --harness") -> None:
    """Fail in one line, before any work, when lm-eval (or what its `hf` model needs) is not
    installed; `asker` names what needs it."""
    try:
        import lm_eval  # noqa: F401
        import lm_eval.models.huggingface  # noqa: F401
    except ImportError:
        raise ConfigError(INSTALL.format(asker)) from None


def check_language_model(folder: Path) -> None:
    """Refuse an adapter whose model is no language model (a classifier's, a masked LM's):
    lm-eval scores text, which such a head does not produce."""
    task = read_adapter_manifest(folder).task
    if not task:
        raise AdapterFileError(
            f"{folder}: the manifest names no task, so what its model predicts is unknown; "
            "lm-evaluation-harness scores causal-LM and sequence-to-sequence adapters"
        )
    kind = get_task(task).model_kind
    if kind not in LANGUAGE_MODELS:
        raise ConfigError(
            f"{folder} is a {task} adapter, whose model has a {model_head(kind)} head, not a "
            "language-model head: lm-evaluation-harness scores the log-likelihoods and "
            "generations of text; give a causal-LM or sequence-to-sequence adapter (trained "
            "with --task causal-lm, sft, chat or seq2seq)"
        )


def model_head(kind: ModelKind) -> str:
    """The head of a model of `kind` other than a language model's, as a refusal names it."""
    return _HEADS.get(kind, kind)


def task_names(tasks: str | Sequence[str]) -> list[str]:
    """The task names (a text: comma-separated), at least one, each named once."""
    listed = tasks.split(",") if isinstance(tasks, str) else tasks
    names = [name.strip() for name in listed if name.strip()]
    if not names:
        raise ConfigError("--harness needs at least one lm-eval task, e.g. --harness arc_easy")
    if len(set(names)) != len(names):
        raise ConfigError(f"--harness names a task more than once: {', '.join(names)}")
    return names


def _include_folder(include: str | os.PathLike[str] | None) -> Path | None:
    """The folder of the user's task YAML, which must exist and be a folder."""
    if include is None:
        return None
    folder = Path(include)
    if not folder.exists():
        raise ConfigError(
            f"--harness-include {folder}: no such folder; give the folder of your task YAML files"
        )
    if not folder.is_dir():
        raise ConfigError(
            f"--harness-include {folder} is a file; give the folder that holds your task YAML"
        )
    return folder


def _default_folder(adapter: Path | None) -> Path | None:
    """`lm_eval/` in the run folder the adapter belongs to, or in the adapter folder itself
    when it is in no run; None for no adapter (a base model alone)."""
    if adapter is None:
        return None
    run = adapter.parent
    in_run = adapter.name == ADAPTER_FOLDER and is_run_folder(run)
    return (run if in_run else adapter) / HARNESS_FOLDER


def _results_folder(
    adapter: Path | None, out: str | os.PathLike[str] | None, inputs: list[tuple[Path, str]]
) -> Path | None:
    """Where the results go (`out`, else the adapter's default folder; None for a base model
    alone without `out`), checked before any work: new or lm-eval's, apart from `inputs` and
    from the adapter (but for the default folder, which may be inside it)."""
    folder = Path(out) if out is not None else _default_folder(adapter)
    if folder is None:
        return None
    default = _default_folder(adapter)
    if adapter is not None and os.path.realpath(folder) != os.path.realpath(str(default)):
        inputs = [*inputs, (adapter, "adapter")]
    check_results_folder(folder, inputs)
    return folder


def task_manager(include: Path | None, builtin: bool) -> Any:
    """lm-eval's task index: its own tasks (unless not `builtin`) and those in `include`."""
    from lm_eval.tasks import TaskManager

    if include is None and not builtin:
        raise ConfigError("with lm-eval's own tasks left out, give a folder of task YAML files")
    return TaskManager(include_path=str(include) if include else None, include_defaults=builtin)


@functools.cache
def task_index(include: Path | None) -> Any:
    """lm-eval's index of its own tasks and those in `include`, built once per process (it
    reads thousands of task files): a study's check and all its runs, or every model a probe
    scores, share it."""
    return task_manager(include, True)


def load_tasks(manager: Any, names: Sequence[str]) -> HarnessTasks:
    """Each named task, group or tag (or task YAML file) of `manager`'s index built, data
    loaded, to score one model on; a name lm-eval does not know, or a task it cannot load, is
    a one-line error naming it (every name is checked before any data loads)."""
    check_task_names(manager, names)
    items: list[Any] = []
    for name in names:
        try:
            loaded = manager.load([name])
        except Exception as error:  # lm-eval's and the data loaders' errors, of many kinds
            raise ConfigError(
                f"lm-eval could not load task {name!r}: {one_line(error)}; check the task's "
                "YAML, and that its data set is in the Hugging Face cache or can be downloaded"
            ) from error
        items += _top_level(loaded)
    return HarnessTasks(items=items, manager=manager)


def check_task_names(manager: Any, names: Sequence[str]) -> None:
    """Refuse, naming it, a name that is no task, group or tag of `manager`'s index (nor a
    task YAML file); where a task YAML of the user's folder does not parse (the index skips
    it), the refusal names that file, its line and YAML's problem instead."""
    for name in names:
        if name not in manager.all_tasks and not Path(name).is_file():
            unparsed = unparsed_task_file(task_folders(manager.include_path))
            if unparsed is not None:
                raise ConfigError(
                    f"lm-eval has no task {name!r}: {unparsed} (a task YAML that does not "
                    "parse is skipped); fix the file"
                )
            close = difflib.get_close_matches(name, manager.all_tasks, n=3)
            meant = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ConfigError(
                f"lm-eval has no task, group or tag {name!r}{meant}; list them with `lm-eval ls "
                "tasks`, adding --include_path DIR for a folder of your own task YAML"
            )


def _top_level(loaded: dict[str, Any]) -> list[Any]:
    """What one name built, as `simple_evaluate` takes it: its group (which holds its tasks
    and subgroups), else its task (or a tag's tasks)."""
    inner = {child for children in loaded["group_map"].values() for child in children}
    groups = [group for name, group in loaded["groups"].items() if name not in inner]
    return groups or list(loaded["tasks"].values())


def _load(
    folder: Path | None,
    model: str | None,
    kind: ModelKind | None,
    device: str,
    quantize: str | None,
) -> tuple[LoadedModel, dict[str, Any]]:
    """The model to score, on `device`: the adapter in `folder` on its base, else the base
    `model` alone as a model of `kind`; and how lm-eval's records name it (`model_args`)."""
    if folder is not None:
        loaded, _ = load_trained(folder, device, model=model, quantize=quantize)
        return loaded, {"pretrained": loaded.model_id, "adapter": str(folder)}
    assert model is not None and kind is not None  # checked by evaluate
    loaded = load_model(model, kind)
    base: nn.Module = loaded.model
    base.to(torch_device(device)).eval()
    if quantize is not None:
        quantize_base(base, quantize)
    return loaded, {"pretrained": model}


def _base_kind(model: str) -> ModelKind:
    """Whether the base `model` loads as a sequence-to-sequence or causal LM (read from its
    config); an encoder, which predicts no next token, is refused."""
    source = resolve_model(model)
    with quiet_transformers(), load_errors(model, source):
        config = AutoConfig.from_pretrained(
            source.location, local_files_only=source.local_files_only
        )
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq_lm"
    if is_encoder(config):
        architecture = (config.architectures or [config.model_type])[0]
        raise ConfigError(
            f"{model} is a {architecture} ({config.model_type}), an encoder that predicts no "
            "next token; lm-evaluation-harness scores causal and sequence-to-sequence LMs"
        )
    return "causal_lm"
