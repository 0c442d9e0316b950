"""`adaptlab adapters show`, `adaptlab export` and `adaptlab import`: adapter folders as files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.options import BaseModel, Device
from adaptlab.errors import ConfigError
from adaptlab.methods import save_adapter
from adaptlab.methods.manifest import MEMBERS, Manifest, adapter_folder, parse_manifest
from adaptlab.methods.peft_format import export_peft, import_peft
from adaptlab.models.loading import load_model
from adaptlab.paths import check_new_folder, existing
from adaptlab.tasks.registry import labelled_task
from adaptlab.train.restore import load_trained

app = typer.Typer(help="Look inside adapter folders.", no_args_is_help=True)
FORMATS = ("peft",)


@app.command("show")
def show(
    path: Annotated[Path, typer.Argument(help="Adapter folder, or a run folder holding adapter/.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """List a folder's adapters: name, kind, methods, size, base model and composition.

    Example:

        adaptlab adapters show runs/rt-fusion
    """
    folder = adapter_folder(path)
    rows = list(_rows(folder, parse_manifest(folder), ""))
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    top = parse_manifest(folder)
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
            f"{row['parameters']:,}",
            f"{row['bytes']:,}",
            row["composition"] or "-",
        )
    console().print(table)
    test = (top.metrics or {}).get("test")
    if isinstance(test, dict):
        print("test: " + ", ".join(f"{k} {v:.4f}" for k, v in test.items() if _number(v)))


def _rows(folder: Path, manifest: Manifest, indent: str) -> Any:
    """One row per adapter: the folder's own, then its members (indented)."""
    if manifest.kind == "fusion":
        methods = f"fusion of {', '.join(manifest.fuses)}"
    else:
        methods = "+".join(c.name for c in manifest.configs)
    composition = manifest.composition
    yield {
        "adapter": indent + manifest.name,
        "kind": manifest.kind,
        "methods": methods,
        "parameters": manifest.tensors.parameters,
        "bytes": manifest.tensors.bytes,
        "composition": None if composition is None else repr(composition),
        "labels": list(manifest.label_names or ()),
    }
    for member in manifest.members:
        sub = folder / MEMBERS / member
        yield from _rows(sub, parse_manifest(sub), indent + "  ")


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
    loaded, manifest = load_trained(adapter, device, model=model)
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
    labels: Annotated[str, typer.Option(help="Label names in the head's order, comma-separated.")],
    task: Annotated[str, typer.Option(help="The adapter's task (a labelled one).")] = (
        "single_label"
    ),
    format: Annotated[str, typer.Option("--format", help="Folder format: peft.")] = "peft",
) -> None:
    """Read a LoRA adapter of another library (PEFT) into an adaptlab adapter folder.

    Example:

        adaptlab import --format peft --model minilm-l6 --labels fresh,rotten peft-out/ runs/x
    """
    _check_format(format)
    head = labelled_task(task).model_kind
    names = [label.strip() for label in labels.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise ConfigError(f"--labels must be distinct non-empty names, got {labels!r}")
    check_new_folder(
        out, "adapter folder", existing([(source, "PEFT folder"), (model, "base model")])
    )
    loaded = load_model(model, head, label_names=names)
    handle = import_peft(loaded.model, source)
    save_adapter(
        loaded.model, out, name=handle.name, base_model_id=model, task=task, label_names=names
    )
    print(f"wrote {out}: {handle.summary().splitlines()[0]}")


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
