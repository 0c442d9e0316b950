"""Package faces import lazily: `import adaptlab`, the report, the records and
`adaptlab --help` load no torch (each checked in a fresh interpreter), while every public name
still resolves to what it always was."""

from __future__ import annotations

import json
import subprocess
import sys
from inspect import isfunction
from pathlib import Path

import pytest

import adaptlab
from adaptlab.cli.app import COMMANDS
from adaptlab.cli.lazy_group import summary
from adaptlab.methods.registry import BUILTIN_METHODS

HEAVY = ("torch", "transformers")

RECORDS = (
    "adaptlab.records.spec",
    "adaptlab.records.result",
    "adaptlab.continual.result",
    "adaptlab.select.validate",
    "adaptlab.report.records",
    "adaptlab.study.store",
)

FACES = (
    "adaptlab",
    "adaptlab.analysis",
    "adaptlab.backbone",
    "adaptlab.data",
    "adaptlab.knowledge",
    "adaptlab.methods",
    "adaptlab.models",
    "adaptlab.report",
    "adaptlab.select",
    "adaptlab.serve",
    "adaptlab.study",
    "adaptlab.continual",
)


def fresh(code: str) -> dict[str, object]:
    """Run `code` in a new interpreter; what it leaves in `found`, and which of HEAVY it
    loaded."""
    script = (
        "import json, sys\nfound = {}\ntry:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "finally:\n"
        + f"    found['heavy'] = [m for m in {HEAVY!r} if m in sys.modules]\n"
        + "    print(json.dumps(found), file=sys.__stderr__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    return dict(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", ["adaptlab", "adaptlab.report", "adaptlab.report.write"])
def test_the_package_and_the_report_load_no_torch(module: str) -> None:
    assert fresh(f"import {module}")["heavy"] == []


@pytest.mark.parametrize("module", RECORDS)
def test_the_records_load_no_torch(module: str) -> None:
    assert fresh(f"import {module}")["heavy"] == []


def test_help_lists_every_command_without_torch() -> None:
    found = fresh(
        "import contextlib, io\n"
        "from adaptlab.cli.app import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "found['help'] = out.getvalue()"
    )
    assert found["heavy"] == []
    listed = str(found["help"])
    assert all(f" {name} " in listed for name in COMMANDS)
    assert "Adapt a model to a data set, keep the best epoch on dev" in listed


def test_listed_summaries_are_the_commands_own_help() -> None:
    import typer
    from typer.main import get_command

    from adaptlab.cli.app import app

    group = get_command(app)
    for name, target in COMMANDS.items():
        loaded = group.resolve_command(typer.Context(group), [name])[1]
        assert loaded is not None and loaded.help is not None
        assert summary(*target) == loaded.help, name


@pytest.mark.parametrize("face", FACES)
def test_every_public_name_of_a_face_resolves(face: str) -> None:
    module = __import__(face, fromlist=["__all__"])
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == [] and set(module.__all__) <= set(dir(module))


def test_a_submodule_never_hides_the_public_name_it_shares() -> None:
    found = fresh(
        "import adaptlab.methods.adapt, adaptlab.select.rank, adaptlab.models.fingerprint\n"
        "import adaptlab, adaptlab.select, adaptlab.models\n"
        "found['kinds'] = [type(f).__name__ for f in "
        "(adaptlab.adapt, adaptlab.methods.adapt, adaptlab.select.rank, "
        "adaptlab.models.fingerprint)]"
    )
    assert found["kinds"] == ["function"] * 4
    assert isfunction(adaptlab.adapt)


def test_methods_and_strategies_list_in_their_order_whatever_loads_first() -> None:
    found = fresh(
        "import adaptlab.methods.fusion, adaptlab.continual.replay\n"
        "from adaptlab.methods.registry import list_methods\n"
        "from adaptlab.continual.registry import list_strategies\n"
        "found['methods'] = [m.name for m in list_methods()]\n"
        "found['strategies'] = [s.name for s in list_strategies()]"
    )
    assert found["methods"] == list(BUILTIN_METHODS)
    assert found["strategies"] == [
        "sequential",
        "kd-logit",
        "ewc",
        "adapter-per-stage",
        "replay",
        "kd-representation",
        "kd-contrastive",
    ]


def test_reading_a_store_and_old_records_loads_no_torch(tmp_path: Path) -> None:
    from study_helpers import OLD_RECORD, one_run_store

    store = one_run_store(tmp_path)
    fusion = json.loads(OLD_RECORD.read_text())
    fusion["spec"]["methods"] = [{"name": "fusion", "config": {"temperature": 2.0}}]
    fusion["spec"]["fuse"] = ["runs/a", "runs/b"]
    (tmp_path / "fusion.json").write_text(json.dumps(fusion))
    found = fresh(
        "import json\n"
        "from adaptlab.study.store import load_records\n"
        "from adaptlab.records.result import RunResult\n"
        f"records = load_records({str(store)!r})\n"
        "found['stored'] = [[c.name for c in r.result.spec.methods] for r in records]\n"
        "found['read'] = []\n"
        f"for name in ({str(OLD_RECORD)!r}, {str(tmp_path / 'fusion.json')!r}):\n"
        "    with open(name) as file:\n"
        "        spec = RunResult.from_dict(json.load(file)).spec\n"
        "    found['read'].append([c.name for c in spec.trained_configs])\n"
    )
    assert found["heavy"] == []
    assert found["stored"] == [["lora"]]
    assert found["read"] == [["houlsby"], ["fusion"]]


def test_the_method_registry_builds_every_config_without_torch() -> None:
    found = fresh(
        "from adaptlab.methods.registry import METHODS, list_methods, make_config\n"
        "found['configs'] = [make_config(method.name).name for method in METHODS]\n"
        "found['listed'] = [entry.name for entry in list_methods()]"
    )
    assert found["heavy"] == []
    assert found["configs"] == [name for name in BUILTIN_METHODS if name != "fusion"]
    assert found["listed"] == list(BUILTIN_METHODS)


def test_study_status_and_report_load_no_torch(tmp_path: Path) -> None:
    """Watching and reporting a study reads records and draws plots: no training code."""
    from study_helpers import one_run_store

    store = one_run_store(tmp_path)
    found = fresh(
        "import contextlib, io\n"
        "from adaptlab.cli.app import main\n"
        "found['codes'] = []\n"
        f"for args in (['status', {str(store)!r}], ['report', {str(store)!r}]):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main(['study', *args])\n"
        "        except SystemExit as done:\n"
        "            found['codes'].append(done.code or 0)\n"
    )
    assert found["codes"] == [0, 0]
    assert (tmp_path / "s.html").is_file()
    assert found["heavy"] == []
