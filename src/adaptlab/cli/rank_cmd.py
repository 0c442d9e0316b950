"""`adaptlab rank`: rank pretrained models (and layers) for a data set before fine-tuning any."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer

from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.options import (
    DataOption,
    Device,
    at_least_two,
    non_negative,
    positive,
    seed,
)
from adaptlab.cli.rank_output import print_report
from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write
from adaptlab.paths import check_output_file, check_writable, existing, json_with_key
from adaptlab.select.controls import check_control_folders, parse_candidates, write_candidate
from adaptlab.select.features import Pooling
from adaptlab.select.layers import Aggregate
from adaptlab.select.rank import FeatureOptions
from adaptlab.select.rank_and_validate import RankRequest, rank_and_validate
from adaptlab.select.registry import ESTIMATORS, make_estimators
from adaptlab.study.store import ResultStore
from adaptlab.study.store_paths import store_files

_REGRESSION_ESTIMATORS = ESTIMATORS.names(lambda estimator: estimator.regression)


@with_data_file_options()
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
            help=f"all, or some of {', '.join(ESTIMATORS.names())} (for regression targets: "
            f"{', '.join(_REGRESSION_ESTIMATORS)})."
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
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Score candidate models for a data set with transferability estimators; print the ranking.

    Example:

        adaptlab rank --data rotten-tomatoes --models minilm-l6,mpnet-base,smollm2-135m

        adaptlab rank --models minilm-l6,minilm-l6@reinit --layers --validate study.db
    """
    candidates = parse_candidates(models)
    if write_controls is not None:
        _refuse_with_controls({"--json": json_out, "--validate": store})
        check_control_folders(candidates, write_controls)
        for candidate in candidates:
            console().print(f"wrote {write_candidate(candidate, write_controls, seed)}")
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
    request = RankRequest(
        candidates,
        tuple(make_estimators(estimators)),
        FeatureOptions(
            sample=sample or None,
            seed=seed,
            pooling=cast(Pooling, pooling),
            batch_size=batch_size,
            max_length=max_length,
            use_cache=cache,
            device=device,
            progress=progress,
            drop_rare_classes=drop_rare_classes,
        ),
        how=cast(Aggregate, aggregate),
        per_layer=layers,
    )
    if store is None:
        report = rank_and_validate(request, data, data_file.load_options())
    else:  # the agreement is saved there after the ranking: check that it can be, first
        check_writable(store.parent, "the agreement into the results store")
        with ResultStore(store, create=False) as study:
            report = rank_and_validate(request, data, data_file.load_options(), study)
    print_report(report, request, store)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(json_out, json.dumps(report.to_dict(), indent=1).encode("utf-8"))


def _refuse_with_controls(outputs: dict[str, Path | None]) -> None:
    """`--write-controls` only writes model folders: an option asking for results of a ranking
    would be left unwritten, so it is refused."""
    for option, value in outputs.items():
        if value is not None:
            raise ConfigError(
                f"--write-controls only writes the candidates as model folders and ranks "
                f"nothing, so {option} {value} would be ignored; drop one of the two"
            )
