"""`adaptlab adapters show`, `adaptlab export` and `adaptlab import`: adapter folders as files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import safetensors
import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.options import BaseModel, Device, Head
from adaptlab.engine.restore import load_trained
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.methods.manifest import MEMBERS, TENSORS, Manifest, adapter_folder, parse_manifest
from adaptlab.methods.peft_config import PeftConfig, check_base
from adaptlab.methods.peft_format import export_peft
from adaptlab.methods.peft_import import import_peft
from adaptlab.methods.peft_read import read_peft
from adaptlab.methods.persistence import save_adapter
from adaptlab.models.loading import ModelKind, load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.paths import check_new_folder, existing
from adaptlab.tasks.registry import labelled_task, task_names
from adaptlab.tasks.task import Task

CAUSAL_LM: ModelKind = "causal_lm"
"""The model kind a causal-LM PEFT adapter loads on (`adaptlab.models.loading`)."""

app = typer.Typer(help="Look inside adapter folders.", no_args_is_help=True)
FORMATS = ("peft",)


@app.command("show")
def show(
    path: Annotated[Path, typer.Argument(help="Adapter folder, or a run folder holding adapter/.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """List a folder's adapters: name, kind, methods, size, base model and composition.

    Parameters and bytes are counted from each tensor file (its header only, no tensor is
    read); where the manifest lists other counts, the output says so (with --json, in each
    row's "problem", null where the counts agree).

    Example:

        adaptlab adapters show runs/rt-fusion
    """
    folder = adapter_folder(path)
    top = parse_manifest(folder)
    rows = list(_rows(folder, top, ""))
    if as_json:
        if top.combined is not None:
            rows[0] = {**rows[0], **{k: top.raw[k] for k in ("combined", "heads") if k in top.raw}}
        print(json.dumps(rows, indent=2))
        return
    base = top.base_model
    title = (
        f"{folder}: base {base.id} ({base.model_class}, fingerprint "
        f"{base.fingerprint}), task {top.task}"
    )
    table = Table(title=title)
    for column in ("adapter", "kind", "methods", "parameters", "bytes", "runs as"):
        table.add_column(column, justify="right" if column in ("parameters", "bytes") else "left")
    for row in rows:
        table.add_row(
            row["adapter"],
            row["kind"],
            row["methods"],
            _count(row["parameters"], row["manifest_parameters"]),
            _count(row["bytes"], row["manifest_bytes"]),
            row["composition"] or "-",
        )
    console().print(table)
    for row in rows:
        if row["problem"]:
            print(f"{row['adapter'].strip()}: {row['problem']}")
    test = (top.metrics or {}).get("test")
    if isinstance(test, dict):
        print("test: " + ", ".join(f"{k} {v:.4f}" for k, v in test.items() if _number(v)))
    for line in _combined_lines(top):
        print(line)


def _combined_lines(manifest: Manifest) -> list[str]:
    """What a combined adapter was made from, and the heads it keeps."""
    if manifest.combined is None:
        return []
    combination = manifest.combined.combination
    options = ", ".join(
        f"{key} {combination[key]}"
        for key in ("density", "rank", "majority_sign", "seed")
        if combination.get(key) not in (None, "total", 0)
    )
    sources = ", ".join(
        f"{s.name} (weight {s.weight:g}, {s.task}, tensors {s.sha256[:12]})"
        for s in manifest.combined.sources
    )
    lines = [f"combined by {combination['how']}{f' ({options})' if options else ''} of {sources}"]
    if manifest.heads:
        heads = "; ".join(
            f"{name}: {head.task}, {', '.join(head.label_names or ())}"
            for name, head in manifest.heads.items()
        )
        lines.append(f"heads (choose one with --head): {heads}")
    return lines


def _count(found: int, listed: int) -> str:
    """A count from the tensor file, with the manifest's where that differs."""
    return f"{found:,}" if found == listed else f"{found:,} (manifest: {listed:,})"


def _rows(folder: Path, manifest: Manifest, indent: str) -> Any:
    """One row per adapter: the folder's own, then its members (indented)."""
    if manifest.kind == "fusion":
        methods = f"fusion of {', '.join(manifest.fuses)}"
    else:
        methods = "+".join(c.name for c in manifest.configs)
    composition = manifest.composition
    parameters, size = _tensor_counts(folder)
    listed = manifest.tensors.parameters, manifest.tensors.bytes
    yield {
        "adapter": indent + manifest.name,
        "kind": manifest.kind,
        "methods": methods,
        "parameters": parameters,
        "bytes": size,
        "manifest_parameters": listed[0],
        "manifest_bytes": listed[1],
        "problem": _count_problem((parameters, size), listed),
        "composition": None if composition is None else repr(composition),
        "labels": list(manifest.label_names or ()),
    }
    for member in manifest.members:
        sub = folder / MEMBERS / member
        yield from _rows(sub, parse_manifest(sub), indent + "  ")


def _count_problem(found: tuple[int, int], listed: tuple[int, int]) -> str | None:
    """What a manifest whose counts are not its tensor file's means (None where they agree):
    both views say it, the counts shown being the file's."""
    if found == listed:
        return None
    return (
        f"the manifest lists {listed[0]:,} parameters and {listed[1]:,} bytes, its {TENSORS} "
        f"holds {found[0]:,} and {found[1]:,}: the folder was edited or is damaged, and "
        "loading it is refused"
    )


def _tensor_counts(folder: Path) -> tuple[int, int]:
    """The values and bytes of `folder`'s tensor file, from its header (no tensor is read)."""
    path = folder / TENSORS
    if not path.is_file():
        raise AdapterFileError(f"{path}: missing; the adapter folder is incomplete")
    try:
        with safetensors.safe_open(str(path), framework="pt") as file:
            names = file.keys()  # a list: the file is no mapping to iterate
            values = sum(math.prod(file.get_slice(name).get_shape()) for name in names)
    except Exception as reason:  # safetensors raises its own error types for bad headers
        raise AdapterFileError(f"{path}: cannot be read as safetensors ({reason})") from None
    return values, path.stat().st_size


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def export(
    adapter: Annotated[
        Path, typer.Option(help="Adapter folder, or a run folder holding adapter/.")
    ],
    out: Annotated[Path, typer.Argument(help="Folder to write.")],
    format: Annotated[str, typer.Option("--format", help="Folder format: peft.")] = "peft",
    model: BaseModel = None,
    device: Device = "auto",
    head: Head = None,
) -> None:
    """Write a trained LoRA adapter in another library's format.

    PEFT: adapter_config.json and adapter_model.safetensors, the head as modules_to_save, the
    base model named by its hub id; adaptlab.json keeps what PEFT's format has no field for (a
    built-in's alias, the label names, which saved modules are pretrained parts of the base),
    and README.md is a model card saying how to load it with the labels.

    Example:

        adaptlab export --adapter runs/rt-lora --format peft runs/rt-lora-peft
    """
    _check_format(format)
    inputs = existing([(adapter, "adapter"), (model, "base model")])
    check_new_folder(out, "export folder", inputs)
    loaded, manifest = load_trained(adapter, device, model=model, head=head)
    export_peft(
        loaded.model,
        out,
        name=manifest.get("name"),
        base_model_id=model or manifest["base_model"]["id"],
        label_names=manifest.get("label_names"),
    )
    print(f"wrote {out} (PEFT LoRA; load with peft.PeftModel.from_pretrained, see its README.md)")


def import_(
    source: Annotated[Path, typer.Argument(help="The folder to read (a PEFT LoRA adapter).")],
    out: Annotated[Path, typer.Argument(help="adaptlab adapter folder to write.")],
    model: Annotated[str, typer.Option("--model", help="The base model the adapter was made for.")],
    labels: Annotated[
        str | None,
        typer.Option(help="Label names in the head's order, comma-separated (classifiers)."),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            help="single_label, multi_label or regression (SEQ_CLS; default single_label), "
            "token (TOKEN_CLS)."
        ),
    ] = None,
    format: Annotated[str, typer.Option("--format", help="Folder format: peft.")] = "peft",
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Import although the folder names another base model than --model (the same "
            "model under another name).",
        ),
    ] = False,
) -> None:
    """Read a LoRA adapter of another library (PEFT) into an adaptlab adapter folder.

    PEFT's task type decides what it becomes: SEQ_CLS and TOKEN_CLS a classifier (with
    --labels), CAUSAL_LM a causal-LM adapter (`adaptlab serve` generates with it). The folder's
    base_model_name_or_path must name --model (its name, built-in alias or hub id, or the same
    folder) unless --force.

    Example:

        adaptlab import --format peft --model minilm-l6 --labels fresh,rotten peft-out/ runs/x
    """
    _check_format(format)
    if task is not None:
        labelled_task(task)  # an unknown or unlabelled task is one line
    names = None if labels is None else [label.strip() for label in labels.split(",")]
    if names is not None and (not all(names) or len(set(names)) != len(names)):
        raise ConfigError(f"--labels must be distinct non-empty names, got {labels!r}")
    check_new_folder(
        out, "adapter folder", existing([(source, "PEFT folder"), (model, "base model")])
    )
    resolve_model(model)  # a damaged model folder is named before the PEFT folder is read
    adapter = read_peft(source)
    imported = _imported_task(adapter.config, task, names)
    note = check_base(adapter.config, model, force)
    kind = CAUSAL_LM if imported is None else imported.model_kind
    loaded = load_model(model, kind, label_names=names)
    handle = import_peft(loaded.model, adapter)
    save_adapter(
        loaded.model,
        out,
        name=handle.name,
        base_model_id=model,
        task=None if imported is None else imported.name,
        label_names=names or (),  # a causal LM's config names labels it has no head for
    )
    what = " (a causal-LM adapter: adaptlab serve generates with it)" if imported is None else ""
    print(f"wrote {out}: {handle.summary().splitlines()[0]}{what}")
    if note:
        print(f"note: {note}")


def _imported_task(config: PeftConfig, task: str | None, labels: list[str] | None) -> Task | None:
    """The task a PEFT adapter is imported for, by its task type, --task and --labels (None: a
    causal-LM adapter, which takes neither): TOKEN_CLS a word-level task, SEQ_CLS another
    labelled one (the first listed of its kind unless --task names it); a classifier needs
    its labels."""
    task_type = config.task_type
    if task_type == "CAUSAL_LM":
        if task is not None or labels is not None:
            raise ConfigError(
                f"{config.path}: task_type CAUSAL_LM is a causal-LM adapter, which has no labels "
                "or task: leave out --labels and --task"
            )
        return None
    words = task_type == "TOKEN_CLS"
    fitting = task_names(lambda kind: kind.labelled and kind.word_level == words)
    chosen = labelled_task(task if task is not None else fitting[0])
    if chosen.word_level != words:
        raise ConfigError(
            f"{config.path}: task_type {task_type} does not fit --task {chosen.name} "
            f"({task_type} takes {', '.join(fitting)})"
        )
    if labels is None:
        raise ConfigError(
            f"{config.path}: task_type {task_type} is a classifier: give --labels, the label "
            "names in the order of its head"
        )
    return chosen


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
