"""`adaptlab combine` refuses what makes no combination, in one line with exit status 1, its
inputs unchanged byte for byte and no folder written: a single adapter, one folder given twice,
an empty option, sources that cannot combine, bad options; the library refuses them too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Protocol

import pytest
from cli_cases import refused, unchanged
from test_combine import make_source, make_sources

import adaptlab
from adaptlab.errors import ConfigError


@pytest.fixture(scope="module")
def sources(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sources")
    return make_sources(tiny_model_dir, folder, ("a", "b", "houlsby", "ia3"))


@contextmanager
def untouched(*folders: Path | str) -> Iterator[None]:
    """Every file under each of `folders` is left as it was, byte for byte."""
    with ExitStack() as stack:
        for folder in folders:
            stack.enter_context(unchanged(Path(folder)))
        yield


class Refuse(Protocol):
    """`adaptlab combine --adapters ADAPTERS OPTIONS` that must fail in one line holding every
    needle; the line comes back."""

    def __call__(self, adapters: str, options: list[str], *needles: str) -> str: ...


@pytest.fixture
def refuse(
    sources: dict[str, Path],
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> Refuse:
    """A refused `adaptlab combine` that leaves the sources and the base model unchanged and
    writes no `--out` folder."""
    out = tmp_path / "c"

    def run(adapters: str, options: list[str], *needles: str) -> str:
        args = ["combine", "--adapters", adapters, "--out", str(out), "--model", tiny_model_dir]
        with untouched(sources["a"].parent, tiny_model_dir):
            line = refused([*args, *options], capsys, *needles)
        assert not out.exists()
        return line

    return run


def test_a_single_adapter_is_refused(sources: dict[str, Path], refuse: Refuse) -> None:
    needle = f"combine needs at least two adapters, got 1: {sources['a']}"
    refuse(str(sources["a"]), [], needle)


@pytest.mark.parametrize("spelling", ["same", "dotted", "link"])
def test_one_folder_given_twice_is_refused_however_it_is_spelled(
    spelling: str, sources: dict[str, Path], refuse: Refuse, tmp_path: Path
) -> None:
    first = sources["a"]
    second = {"same": first, "dotted": first / ".." / first.name, "link": tmp_path / "link"}[
        spelling
    ]
    if spelling == "link":
        second.symlink_to(first, target_is_directory=True)
    line = refuse(
        f"{first},{second}",
        ["--names", "a,b"],
        f"adapters 1 and 2 ({first} and {second}) are one adapter folder",
        "combine different adapters",
    )
    assert str(first.resolve()) in line


@pytest.mark.parametrize("option", ["--weights", "--names", "--adapters"])
def test_an_empty_option_is_refused_not_taken_as_left_out(
    option: str, sources: dict[str, Path], refuse: Refuse
) -> None:
    adapters = f"{sources['a']},{sources['b']}"
    refuse(adapters, [option, ""], f"{option} is empty")


def test_the_library_refuses_them_too(
    sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    a, b = sources["a"], sources["b"]
    cases = [
        ({"adapters": [a]}, "at least two adapters, got 1"),
        ({"adapters": [a, a], "names": ["x", "y"]}, "are one adapter folder"),
        ({"adapters": [a, b], "weights": []}, "2 adapters, 0 weights"),
        ({"adapters": [a, b], "names": []}, "2 adapters, 0 names"),
    ]
    with untouched(a.parent, tiny_model_dir):
        for options, needle in cases:
            with pytest.raises(ConfigError, match=needle) as caught:
                adaptlab.combine_adapters(out=tmp_path / "c", model=tiny_model_dir, **options)  # type: ignore[arg-type]
            assert "\n" not in str(caught.value)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("pick", "needles"),
    [
        (("a", "houlsby"), ("are of different methods (lora and houlsby)",)),
        (("houlsby", "ia3"), ("are of different methods",)),
    ],
)
def test_sources_that_cannot_combine_are_refused_naming_both(
    pick: tuple[str, str],
    needles: tuple[str, ...],
    sources: dict[str, Path],
    refuse: Refuse,
) -> None:
    first, second = (sources[p] for p in pick)
    refuse(f"{first},{second}", [], str(first), str(second), *needles)


def test_houlsby_of_another_size_is_refused(
    sources: dict[str, Path], refuse: Refuse, tiny_model_dir: str, tmp_path: Path
) -> None:
    other = make_source(tiny_model_dir, tmp_path / "h8", {"houlsby": {"hidden_size": 8}}, seed=1)
    with unchanged(other):
        refuse(f"{sources['houlsby']},{other}", [], "differ in houlsby's hidden_size")


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--weights", "1"], "one weight per adapter: 2 adapters, 1 weights"),
        (["--weights", "1,x"], "--weights: 'x' is not a number"),
        (["--how", "average"], "how"),
        (["--how", "ties"], "density"),
        (["--how", "linear", "--density", "0.5"], "density"),
        (["--how", "linear", "--rank", "2"], "rank"),
        (["--names", "x,x"], "two sources are named 'x'"),
        (["--names", "a b,c"], "cannot name a source"),
        (["--adapters", "a,"], "--adapters has an empty item"),
    ],
)
def test_bad_options_are_refused_in_one_line(
    options: list[str],
    needle: str,
    sources: dict[str, Path],
    refuse: Refuse,
) -> None:
    refuse(f"{sources['a']},{sources['b']}", options, needle)


def test_an_existing_out_folder_and_a_missing_source_are_refused(
    sources: dict[str, Path],
    refuse: Refuse,
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("mine")
    with unchanged(taken):
        args = ["combine", "--adapters", f"{sources['a']},{sources['b']}", "--out", str(taken)]
        refused([*args, "--model", tiny_model_dir], capsys, "exists and is not empty")
    missing = f"{sources['a']},{tmp_path / 'nowhere'}"
    refuse(missing, [], "no such adapter or run folder")
