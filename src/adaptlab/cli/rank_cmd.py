"""`adaptlab rank`: rank pretrained models (and layers) for a data set before fine-tuning any."""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.table import Table
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.cli.options import (
    DataOption,
    Device,
    LabelColumn,
    Task,
    TextColumn,
    TextPairColumn,
    at_least_two,
    data_options,
    non_negative,
    positive,
    seed,
)
from adaptlab.data import load_dataset
from adaptlab.errors import ConfigError, DataError
from adaptlab.fileio import atomic_write
from adaptlab.paths import (
    check_new_folder,
    check_output_file,
    check_output_folder,
    check_writable,
    existing,
    json_with_key,
)
from adaptlab.select import (
    AGGREGATES,
    POOLINGS,
    Candidate,
    FeatureOptions,
    Ranking,
    RankRow,
    Validation,
    make_estimators,
    parse_candidate,
    rank,
    validate,
    write_candidate,
)
from adaptlab.select.features import Pooling
from adaptlab.select.layers import Aggregate
from adaptlab.study import ResultStore, load_records
from adaptlab.study.store import store_files

_console = console()


def rank_models(
    models: Annotated[
        str,
        typer.Option(
            help="Comma-separated candidates: built-in names, folders or hub names; NAME@reinit "
            "(same model, fresh weights) and NAME@firstK (its first K blocks) are controls."
        ),
    ],
    data: DataOption = "rotten-tomatoes",
    estimators: Annotated[
        str,
        typer.Option(
            help="all, or some of logme, hscore, nleep, knn, gbc, transrate, intra-variance."
        ),
    ] = "all",
    sample: Annotated[
        int,
        typer.Option(
            help="Training examples to score (0: all), drawn like a study's.",
            callback=non_negative,
        ),
    ] = 2000,
    seed: Annotated[
        int, typer.Option(help="Seed of the sample (and of @reinit weights).", callback=seed)
    ] = 0,
    drop_rare_classes: Annotated[
        bool,
        typer.Option(
            help="Leave out of the sample the classes with fewer examples than the chosen "
            "estimators need (each states its minimum: 2 for most, knn k // 2 + 2, nleep 6); "
            "the output says how many examples and classes that drops."
        ),
    ] = False,
    pooling: Annotated[str, typer.Option(help="mean (over tokens) or first (token).")] = "mean",
    aggregate: Annotated[
        str, typer.Option(help="last layer, best layer (per estimator), or mean of the layers.")
    ] = "last",
    layers: Annotated[bool, typer.Option(help="Also score and rank every layer.")] = False,
    max_length: Annotated[
        int, typer.Option(help="Tokens per example.", callback=at_least_two)
    ] = 128,
    batch_size: Annotated[
        int, typer.Option(help="Examples per forward pass.", callback=positive)
    ] = 32,
    cache: Annotated[bool, typer.Option(help="Reuse features extracted before.")] = True,
    store: Annotated[
        Path | None,
        typer.Option(
            "--validate",
            help="Study store (.db): correlate scores with its fine-tuned test scores and save "
            "the result there for the study report.",
        ),
    ] = None,
    write_controls: Annotated[
        Path | None,
        typer.Option(help="Only write the candidates as model folders here (for a study)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write results here.")
    ] = None,
    text_column: TextColumn = "text",
    text_pair_column: TextPairColumn = None,
    label_column: LabelColumn = "label",
    task: Task = None,
    device: Device = "cpu",
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Score candidate models for a data set with transferability estimators; print the ranking.

    Example:

        adaptlab rank --data rotten-tomatoes --models minilm-l6,mpnet-base,smollm2-135m

        adaptlab rank --models minilm-l6,minilm-l6@reinit --layers --validate study.db
    """
    candidates = [parse_candidate(text) for text in models.split(",") if text.strip()]
    if not candidates:
        raise ConfigError("--models is empty; give at least one model name")
    names = [candidate.text for candidate in candidates]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--models names {', '.join(twice)} more than once; give each once")
    if write_controls is not None:
        check_control_folders(candidates, write_controls)
        for candidate in candidates:
            _console.print(f"wrote {write_candidate(candidate, write_controls, seed)}")
        return
    if json_out is not None:
        inputs = existing(
            [(data, "data"), *((candidate.base, "base model") for candidate in candidates)]
        )
        check_output_file(
            json_out,
            "rank result",
            replaceable=lambda path: json_with_key(path, "ranking"),
            inputs=[*inputs, *(store_files(store) if store is not None else [])],
        )
    chosen = make_estimators(estimators)
    if aggregate not in AGGREGATES or pooling not in POOLINGS:  # before any long work
        raise ConfigError(
            f"--aggregate is one of {', '.join(AGGREGATES)} and --pooling one of "
            f"{', '.join(POOLINGS)}; got {aggregate!r} and {pooling!r}"
        )
    dataset = load_dataset(data, **data_options(text_column, text_pair_column, label_column, task))
    fine_tuned = None
    if store is not None:  # the agreement is saved there after the ranking: check it first
        check_writable(store.parent, "the agreement into the results store")
        fine_tuned = fine_tuned_scores(store, dataset.name)
    options = FeatureOptions(
        sample=sample or None,
        seed=seed,
        pooling=cast(Pooling, pooling),
        batch_size=batch_size,
        max_length=max_length,
        use_cache=cache,
        device=device,
        progress=progress,
        drop_rare_classes=drop_rare_classes,
    )
    started = time.perf_counter()
    ranking = rank(
        candidates,
        dataset,
        chosen,
        options=options,
        how=cast(Aggregate, aggregate),
        per_layer=layers,
    )
    seconds = time.perf_counter() - started
    if ranking.dropped is not None:
        _console.print(ranking.dropped.describe(ranking.examples), highlight=False)
    title = f"{dataset.name}: scores ({aggregate} layer{'s' if aggregate == 'mean' else ''})"
    _print_scores(ranking, ranking.rows, title, show_layer=aggregate == "best")
    if layers:
        _print_scores(ranking, ranking.layer_rows, f"{dataset.name}: scores per layer")
    _console.print(
        f"{len(candidates)} candidates, {ranking.examples} examples: {seconds:.1f} s "
        f"(features {ranking.extract_seconds:.1f} s, {ranking.cache_hits} from cache; "
        f"scoring {ranking.score_seconds:.1f} s)"
    )
    for name in ranking.estimators:
        tiers = ranking.tiers(name)
        _console.print(f"ranking by {name}: " + " > ".join(" = ".join(t) for t in tiers))
    result: dict[str, Any] = {"ranking": _ranking_json(ranking), "seconds": seconds}
    if store is not None and fine_tuned is not None:
        found = {"models": _validate(ranking, ranking.rows, fine_tuned, "candidates")}
        if layers:
            found["layers"] = _validate(ranking, ranking.layer_rows, fine_tuned, "layer candidates")
        with ResultStore(store, create=False) as results:
            for kind, validation in found.items():
                results.save_validation(dataset.name, kind, validation.to_dict())
        _console.print(f"saved in {store}: `adaptlab study report` shows it")
        result["validation"] = {kind: v.to_dict() for kind, v in found.items()}
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(json_out, json.dumps(result, indent=1).encode("utf-8"))


def check_control_folders(candidates: list[Candidate], out: Path) -> None:
    """Fail, before any model loads, unless `out` is new or empty and apart from every
    candidate's base model folder."""
    check_output_folder(out, "the control models")
    for candidate in candidates:
        check_new_folder(out / candidate.folder_name, "control model folder")
    inputs = existing([(candidate.base, "base model") for candidate in candidates])
    check_new_folder(out, "the control models folder", inputs)


def fine_tuned_scores(store: Path, data_name: str) -> dict[str, float]:
    """Mean test score per model (keyed by built-in name or folder name) of a study's done runs
    on `data_name`, in each run's own metric; a run whose score is NaN or infinite (it
    diverged) is left out, and said so."""
    by_model: dict[str, list[float]] = defaultdict(list)
    diverged = 0
    for stored in load_records(store, planned_only=True):
        result = stored.result
        if result.data.name != data_name:
            continue
        value = result.test.get(result.metric)
        if value is not None and not math.isfinite(value):
            diverged += 1
        elif value is not None:
            by_model[Path(result.spec.model).name].append(value)
    if diverged:
        _console.print(
            f"left out {diverged} run{'s' if diverged > 1 else ''} of {store} whose test score "
            "is NaN or infinite (diverged)",
            highlight=False,
        )
    if not by_model:
        finite = " with a finite test score" if diverged else ""
        raise DataError(f"study store {store} holds no finished runs on {data_name!r}{finite}")
    return {model: sum(values) / len(values) for model, values in by_model.items()}


def _validate(
    ranking: Ranking, rows: tuple[RankRow, ...], fine_tuned: dict[str, float], what: str
) -> Validation:
    """Each estimator's agreement with the fine-tuned scores, printed as a table."""
    found = validate(ranking, rows, fine_tuned, what)
    table = Table(
        title=f"{ranking.data}: agreement with fine-tuning ({what}: {', '.join(found.fine_tuned)})"
    )
    for column in ("estimator", "kendall tau", "weighted tau", "pearson", "n"):
        table.add_column(column, justify="left" if column == "estimator" else "right")
    for name, result in found.agreements.items():
        table.add_row(
            name,
            *(_number(v) for v in (result.kendall_tau, result.weighted_tau, result.pearson)),
            str(result.candidates),
        )
    _console.print(table)
    return found


def _print_scores(
    ranking: Ranking, rows: tuple[RankRow, ...], title: str, show_layer: bool = False
) -> None:
    """A table of score per candidate per estimator, best of each column in bold; with
    `show_layer`, the layer each score came from."""
    table = Table(title=title)
    table.add_column("candidate")
    for name in ranking.estimators:
        table.add_column(name, justify="right")
    best = {name: max(row.scores[name] for row in rows) for name in ranking.estimators}
    for row in rows:
        cells = []
        for name in ranking.estimators:
            text = f"{row.scores[name]:.4g}"
            if show_layer:
                text += f" (L{row.layers[name]})"
            cells.append(Text(text, style="bold" if row.scores[name] == best[name] else ""))
        table.add_row(row.name, *cells)
    _console.print(table)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _ranking_json(ranking: Ranking) -> dict[str, Any]:
    return {
        "data": ranking.data,
        "examples": ranking.examples,
        "estimators": list(ranking.estimators),
        "rows": [row.__dict__ for row in ranking.rows],
        "layer_rows": [row.__dict__ for row in ranking.layer_rows],
        "extract_seconds": ranking.extract_seconds,
        "score_seconds": ranking.score_seconds,
        "cache_hits": ranking.cache_hits,
        "dropped": None if ranking.dropped is None else asdict(ranking.dropped),
        "order": {name: ranking.order(name) for name in ranking.estimators},
        "tiers": {name: ranking.tiers(name) for name in ranking.estimators},
    }
