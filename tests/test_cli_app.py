"""The `adaptlab` entry point: exit codes and messages for usage errors, user errors, Ctrl-C."""

from __future__ import annotations

import pytest

from adaptlab.cli import methods_cmd
from adaptlab.cli.app import main
from adaptlab.errors import ConfigError


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    return int(done.value.code or 0), capsys.readouterr().err


def test_a_missing_option_is_a_usage_error_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run(["train", "--method", "lora", "--model", "x"], capsys)
    assert code == 2
    assert "Missing option '--data'" in err and "Traceback" not in err


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["trian"], capsys)
    assert code == 2 and "No such command 'trian'" in err


def test_a_user_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse() -> list[object]:
        raise ConfigError("no methods today")

    monkeypatch.setattr(methods_cmd, "list_methods", refuse)
    code, err = run(["methods"], capsys)
    assert code == 1 and err.strip() == "error: no methods today"


def test_ctrl_c_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt() -> list[object]:
        raise KeyboardInterrupt

    monkeypatch.setattr(methods_cmd, "list_methods", interrupt)
    code, _ = run(["methods"], capsys)
    assert code == 130
