"""The generative tasks end to end from the command line, on a tiny random decoder: `train`
with `--task causal-lm|sft|chat` (padded and packed), what the run records, `eval` agreeing with
the run's own test, `predict` answering prompts and data files, the chat template kept in the
adapter's manifest, and each refusal one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import killed_at_checkpoint, refused, run_cli, unchanged, write_reviews
from generative_helpers import write_chats, write_pairs
from serve_helpers import CHAT_TEMPLATE

TRAIN = ["train", "--method", "lora", "--epochs", "2", "--batch-size", "8", "--seed", "0"]
GENERATION = ["--max-new-tokens", "3"]


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_pairs(tmp_path / "pairs.jsonl", 50)
    write_chats(tmp_path / "chats.jsonl", 30)
    lines = [f"document {i} says {' '.join(str(j) for j in range(i % 9 + 3))}" for i in range(40)]
    (tmp_path / "docs.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def train(decoder: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, _, err = run_cli([*TRAIN, "--model", decoder, *args], capsys)
    assert code == 0, err
    out = args[args.index("--out") + 1]
    return json.loads((Path(out) / "metrics.json").read_text())


def test_an_sft_run_scores_generations_and_records_its_throughput(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = train(
        decoder, capsys, "--data", "pairs.jsonl", "--task", "sft", *GENERATION, "--out", "qa"
    )
    assert result["data"]["task"] == "sft"
    assert result["data"]["sizes"] == {"train": 41, "dev": 5, "test": 4}
    assert result["data"]["dropped"] == {"train": 0, "dev": 0, "test": 0}
    assert result["metric"] == "exact_match"
    for metric in ("perplexity", "token_accuracy", "exact_match", "token_f1", "rougeL", "bleu"):
        assert metric in result["test"]
    assert all(epoch["dev_metrics"]["target_tokens_per_second"] > 0 for epoch in result["epochs"])
    samples = result["generations"]
    assert len(samples) == 4 and {"prompt", "generation", "reference"} <= set(samples[0])
    assert result["spec"]["data_options"] == {"task": "sft", "max_new_tokens": 3}
    manifest = json.loads((work / "qa" / "adapter" / "manifest.json").read_text())
    assert manifest["task"] == "sft" and "chat_template" not in manifest
    assert "target tokens per second" in (work / "qa" / "train.log").read_text()


def test_eval_of_a_trained_run_gives_the_runs_own_test_scores(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = train(
        decoder, capsys, "--data", "pairs.jsonl", "--task", "sft", *GENERATION, "--out", "qa"
    )
    code, out, err = run_cli(
        ["eval", "--adapter", "qa", "--model", decoder, "--data", "pairs.jsonl", "--task", "sft",
         *GENERATION, "--json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    scores = json.loads(out)
    assert scores["examples"] == 4
    assert scores["loss"] == pytest.approx(result["test_loss"], rel=1e-4)
    for metric in ("perplexity", "exact_match", "token_f1", "rougeL"):
        assert scores[metric] == pytest.approx(result["test"][metric], rel=1e-4, abs=1e-6)


def test_predict_answers_prompts_and_the_examples_of_a_data_file(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train(decoder, capsys, "--data", "pairs.jsonl", "--task", "sft", *GENERATION, "--out", "qa")
    (work / "q.txt").write_text("what is 2 plus 2 ?\n\nwhat is 3 plus 3 ?\n")
    base = ["predict", "--adapter", "qa", "--model", decoder, "--max-new-tokens", "2", "--jsonl"]
    code, out, err = run_cli([*base, "--input", "q.txt"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and all("what is" in row["prompt"] for row in rows)
    assert all("reference" not in row for row in rows)
    code, out, err = run_cli([*base, "--input", "pairs.jsonl"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 50
    assert set(rows[0]) == {"prompt", "generation", "reference", "scores"}
    assert set(rows[0]["scores"]) == {"exact_match", "token_f1", "rougeL"}


def test_a_chat_run_keeps_its_template_in_the_adapters_manifest(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train(decoder, capsys, "--data", "chats.jsonl", "--task", "chat", *GENERATION, "--out", "own")
    manifest = json.loads((work / "own" / "adapter" / "manifest.json").read_text())
    assert manifest["task"] == "chat" and manifest["chat_template"] == CHAT_TEMPLATE
    template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    template += "{% if add_generation_prompt %}<assistant>{% endif %}"
    (work / "t.jinja").write_text(template)
    result = train(
        decoder, capsys, "--data", "chats.jsonl", "--task", "chat", "--chat-template", "t.jinja",
        "--pack", *GENERATION, "--out", "file",
    )  # fmt: skip
    manifest = json.loads((work / "file" / "adapter" / "manifest.json").read_text())
    assert manifest["chat_template"] == template
    assert result["metric"] == "rougeL"
    assert result["spec"]["data_options"]["pack"] is True


def test_a_causal_lm_run_keeps_the_epoch_of_lowest_dev_perplexity(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = train(
        decoder, capsys, "--data", "docs.txt", "--task", "causal-lm", "--pack", "--out", "lm"
    )
    assert result["metric"] == "perplexity"
    assert "generations" not in result and "exact_match" not in result["test"]
    dev = [epoch["dev_metrics"]["perplexity"] for epoch in result["epochs"]]
    assert result["best_epoch"] == 1 + dev.index(min(dev))
    assert result["test"]["perplexity"] > 1


def test_answers_that_do_not_fit_are_left_out_and_counted(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"prompt": f"q {i}", "completion": "long answer " * (30 if i % 5 == 0 else 1)}
        for i in range(60)
    ]
    (work / "long.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = train(
        decoder, capsys, "--data", "long.jsonl", "--task", "sft", "--max-length", "32",
        *GENERATION, "--out", "long",
    )  # fmt: skip
    dropped = result["data"]["dropped"]
    assert sum(dropped.values()) == 12
    assert sum(result["data"]["sizes"].values()) == 48


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--data", "pairs.jsonl", "--task", "sft", "--metric", "bleu4"], "not scored by 'bleu4'"),
        (["--data", "pairs.jsonl", "--task", "sft", "--max-new-tokens", "0"], "max_new_tokens"),
        (
            ["--data", "chats.jsonl", "--task", "chat", "--chat-template", "none.jinja"],
            "not a file",
        ),
        (["--data", "reviews.csv", "--pack"], "--pack is for causal-lm, sft and chat runs"),
        (["--data", "pairs.jsonl", "--task", "chat"], "line 1"),
        (["--data", "pairs.jsonl", "--task", "sft", "--stop", ""], "stop"),
        (["--data", "pairs.jsonl", "--task", "sft", "--method", "head"], "head trains nothing"),
    ],
)
def test_bad_generative_runs_are_one_line_and_write_nothing(
    args: list[str], needle: str, decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_reviews(work / "reviews.csv")
    with unchanged(work):
        refused([*TRAIN, "--model", decoder, *args, "--out", "run"], capsys, needle)


def test_an_encoder_is_refused_for_a_generative_task(
    work: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tiny_models import save_tiny_bert

    bert = save_tiny_bert(str(tmp_path / "bert"))
    capsys.readouterr()  # what saving printed
    with unchanged(work):
        refused(
            [*TRAIN, "--model", bert, "--data", "pairs.jsonl", "--task", "sft", "--out", "r"],
            capsys,
            "decoder",
        )


def test_a_killed_packed_sft_run_resumes_to_the_scores_of_an_unbroken_one(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        *TRAIN, "--epochs", "6", "--batch-size", "2", "--model", decoder, "--data", "pairs.jsonl",
        "--task", "sft", "--pack", "--max-length", "24", *GENERATION, "--no-progress",
    ]  # fmt: skip
    assert run_cli([*args, "--out", "unbroken"], capsys)[0] == 0
    killed_at_checkpoint(args, Path("resumed"), 5)
    code, _, err = run_cli([*args, "--out", "resumed", "--resume"], capsys)
    assert code == 0, err
    first, second = (
        json.loads((work / r / "metrics.json").read_text()) for r in ("unbroken", "resumed")
    )
    assert second["best_epoch"] == first["best_epoch"]
    assert second["test_loss"] == pytest.approx(first["test_loss"], rel=1e-5)
    for a, b in zip(first["epochs"], second["epochs"], strict=True):
        assert b["dev_loss"] == pytest.approx(a["dev_loss"], rel=1e-5)


def test_generation_options_on_a_classifier_are_one_line(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_reviews(work / "reviews.csv")
    code, _, err = run_cli(
        [*TRAIN, "--epochs", "1", "--model", decoder, "--data", "reviews.csv", "--out", "cls"],
        capsys,
    )
    assert code == 0, err
    (work / "q.txt").write_text("a fine film\n")
    use = ["--adapter", "cls", "--model", decoder, "--max-new-tokens", "3"]
    with unchanged(work):
        refused(["predict", *use, "--input", "q.txt"], capsys, "--max-new-tokens is for causal-lm")
        refused(["eval", *use, "--data", "reviews.csv"], capsys, "a single_label adapter")
