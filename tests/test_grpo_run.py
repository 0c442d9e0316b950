"""GRPO runs (`--task grpo`) end to end on a tiny decoder with a vocabulary of a few words: a
verifiable reward the base model almost never earns (it answers "yes" to 3% of samples, and
never greedily) is learnt, so dev's mean reward rises from 0 and every epoch records the mean
and spread of its sampled rewards; a reward registered from Python drives a run; sampling is
seeded; a training row holds the tokens the policy drew, not its text tokenised again; the
built-in rewards score as documented; and bad options are refused in one line with nothing
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers as T
from cli_cases import refused, run_cli, unchanged
from tiny_models import tiny_config
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.group_sampling import sample_groups
from adaptlab.errors import ConfigError
from adaptlab.models.loading import LoadedModel, load_model
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.grpo_data import QuestionSplit
from adaptlab.runs.grpo_objective import SEED_RANGE, GroupRelativeLm, sample_rows
from adaptlab.runs.grpo_run import GrpoRun
from adaptlab.runs.preparers import prepare_run
from adaptlab.tasks.grpo_settings import GrpoSettings
from adaptlab.tasks.registry import get_task
from adaptlab.tasks.verifiable_rewards import FormatRule, get_reward, register_reward, reward_for

WORDS = ["yes", "no", "maybe", "ok", "is", "?", *map(str, range(10))]
TRAIN = [
    "--method", "lora", "--epochs", "4", "--batch-size", "4", "--learning-rate", "2e-2",
    "--max-length", "16", "--max-new-tokens", "1", "--device", "cpu", "--no-progress",
]  # fmt: skip


def word_decoder(root: Path) -> str:
    """A tiny random Llama over a word-level vocabulary of `WORDS` (and [PAD], [UNK], [EOS]),
    its weights drawn 10x wider than usual so its next-token distributions are far from
    uniform, as a pretrained model's are (LoRA can then move them within a few steps)."""
    vocab = {word: i for i, word in enumerate(["[PAD]", "[UNK]", "[EOS]", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # words joined by spaces
    tokenizer = T.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )
    config = tiny_config("llama")
    config.vocab_size, config.initializer_range = len(vocab), 0.2
    config.eos_token_id, config.bos_token_id = vocab["[EOS]"], None
    torch.manual_seed(0)
    folder = root / "tiny-words"
    T.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def piece_decoder(root: Path) -> LoadedModel:
    """A tiny random Llama over a word-piece vocabulary in which "y" "##es" decode to "yes",
    which the tokenizer writes as the one token "yes" (and [PAD] and [UNK] decode to no text):
    tokenising a completion's text again need not give back the tokens drawn."""
    words = ["[PAD]", "[UNK]", "[EOS]", "is", "?", "y", "##es", "yes", "no"]
    core = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")
    tokenizer = T.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )
    config = tiny_config("llama")
    config.vocab_size, config.eos_token_id, config.bos_token_id = len(words), 2, None
    torch.manual_seed(0)
    folder = root / "tiny-pieces"
    T.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return load_model(str(folder), "causal_lm", seed=0)


def write_questions(path: Path, answer: str = "yes", count: int = 60) -> Path:
    """`count` questions of two digits, every reference answer `answer`."""
    rows = [{"prompt": f"is {i % 10} {i // 10} ?", "answer": answer} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def grpo_inputs(folder: Path) -> Path:
    """`folder` holding the word decoder and `questions.jsonl`."""
    word_decoder(folder)
    write_questions(folder / "questions.jsonl")
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return grpo_inputs(tmp_path_factory.mktemp("grpo"))


def base_run(inputs: Path, **options: object) -> GrpoRun:
    spec = RunSpec.build(
        str(inputs / "tiny-words"),
        str(inputs / "questions.jsonl"),
        "lora",
        train=TrainConfig(epochs=1, batch_size=4, learning_rate=2e-2, max_length=16, seed=0),
        data_options={"task": "grpo", "max_new_tokens": 1, **options},
        device="cpu",
    )
    run = prepare_run(get_task("grpo"), spec, torch.device("cpu"))
    assert isinstance(run, GrpoRun)
    return run


def train(inputs: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    args = [
        "train",
        "--model",
        str(inputs / "tiny-words"),
        "--data",
        str(inputs / "questions.jsonl"),
    ]
    code, _, err = run_cli([*args, "--task", "grpo", *TRAIN, *extra, "--out", str(out)], capsys)
    assert code == 0, err
    return json.loads((out / "metrics.json").read_text())


def test_a_grpo_run_raises_the_reward_of_its_answers(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = base_run(inputs).dev().metrics  # LoRA starts as the identity: the base model
    assert base["reward"] == 0.0 and base["exact_match"] == 0.0

    metrics = train(inputs, tmp_path / "grpo", capsys, "--reward", "exact")
    epochs = metrics["epochs"]
    assert metrics["metric"] == "reward"
    assert metrics["dev"]["reward"] >= 0.8 and metrics["test"]["reward"] >= 0.8
    assert metrics["test"]["exact_match"] == metrics["test"]["reward"]  # exact is the reward
    for epoch in epochs:
        assert {"reward", "exact_match", "train_reward", "train_reward_std"} <= set(
            epoch["dev_metrics"]
        )
        assert epoch["dev_loss"] == -epoch["dev_metrics"]["reward"]
    first, last = epochs[0]["dev_metrics"], epochs[-1]["dev_metrics"]
    assert last["train_reward"] > 0.8 > 0.6 > first["train_reward"]  # the samples learnt too
    assert 0 < first["train_reward_std"] <= 0.5
    log = (tmp_path / "grpo" / "train.log").read_text()
    assert "step 48 sampled reward mean" in log  # 12 steps an epoch, each logged
    generated = metrics["generations"]
    assert generated and all(g["reference"] == "yes" for g in generated)


def test_a_reward_registered_from_python_drives_the_run(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scored: list[tuple[str, str | None]] = []

    def says_no(completion: str, answer: str | None) -> float:
        scored.append((completion, answer))
        return float(completion.split()[:1] == ["no"])

    register_reward("test-says-no", says_no, needs_answer=False)
    metrics = train(
        inputs,
        tmp_path / "no",
        capsys,
        *("--reward", "test-says-no", "--beta", "0.04", "--loss", "grpo"),
        *("--scale-rewards", "batch", "--num-generations", "6"),
    )
    assert metrics["spec"]["data_options"]["reward"] == "test-says-no"
    assert scored and {answer for _, answer in scored} == {"yes"}
    assert metrics["test"]["reward"] >= 0.8  # it answers "no" ...
    assert metrics["test"]["exact_match"] <= 0.2  # ... where the references say "yes"


def test_sampling_is_seeded_and_grouped(inputs: Path) -> None:
    loaded = load_model(str(inputs / "tiny-words"), "causal_lm", seed=0)
    prompts = [loaded.tokenizer("is 1 2 ?")["input_ids"], loaded.tokenizer("is 3 ?")["input_ids"]]

    def draw(seed: int) -> list[str]:
        samples = sample_groups(
            loaded.model, loaded.tokenizer, prompts, group=8, max_new_tokens=3,
            temperature=1.0, seed=seed,
        )  # fmt: skip
        assert len(samples) == 16 and all(s.tokens <= 3 for s in samples)
        assert all(s.ended == (s.tokens < 3) for s in samples)  # only [EOS] ends one early
        return [s.text for s in samples]

    once = draw(5)
    assert draw(5) == once
    assert draw(6) != once
    assert len(set(once)) > 4  # temperature 1 draws different completions of one prompt


def test_a_row_holds_the_tokens_drawn_not_its_text_tokenised(tmp_path: Path) -> None:
    loaded = piece_decoder(tmp_path)
    model, tokenizer = loaded.model, loaded.tokenizer
    prompt = tokenizer("is ?")["input_ids"]
    split = QuestionSplit([prompt] * 4, ["is ?"] * 4, ["yes"] * 4)
    options = {"task": "grpo", "num_generations": 16, "max_new_tokens": 3}
    objective = GroupRelativeLm(
        model, tokenizer, GrpoSettings.of(options, "grpo"), split, split, eval_batch_size=4
    )
    generator = torch.Generator().manual_seed(0)
    twin = torch.Generator().set_state(generator.get_state())  # draws the step's seed again
    batch = objective.batch([0, 1, 2, 3], generator)
    seed = int(torch.randint(SEED_RANGE, (), generator=twin))
    samples = sample_groups(
        model, tokenizer, [prompt] * 4, group=16, max_new_tokens=3, temperature=1.0, seed=seed
    )
    rows = zip(batch["input_ids"], batch["completion_mask"].bool(), strict=True)
    assert [tuple(ids[mask].tolist()) for ids, mask in rows] == [s.ids for s in samples]
    eos = tokenizer.eos_token_id
    for sample in samples:  # the ids drawn are the text's, and the end of text that ended it
        assert tokenizer.decode(sample.ids, skip_special_tokens=True) == sample.text
        assert (sample.ids[-1] == eos) == sample.ended
        assert len(sample.ids) == sample.tokens + sample.ended
    again = [tokenizer(s.text, add_special_tokens=False)["input_ids"] for s in samples]
    differ = [s.ids for s, ids in zip(samples, again, strict=True) if ids != [*s.ids[: s.tokens]]]
    assert len(differ) >= 8  # "y" "##es" tokenised again as "yes", a drawn [PAD] as nothing
    pieces = [ids for ids in differ if any(ids[i : i + 2] == (5, 6) for i in range(len(ids)))]
    assert pieces, differ


def test_a_completion_a_stop_string_ended_keeps_every_token_it_drew(tmp_path: Path) -> None:
    loaded = piece_decoder(tmp_path)
    tokenizer = loaded.tokenizer
    prompt = tokenizer("is ?")["input_ids"]
    samples = sample_groups(
        loaded.model, tokenizer, [prompt], group=64, max_new_tokens=3, temperature=1.0, seed=0,
        stop=("s",),
    )  # fmt: skip
    stopped = [s for s in samples if s.ended and s.ids[-1] != tokenizer.eos_token_id]
    assert len(stopped) >= 8
    for sample in stopped:
        drawn = tokenizer.decode(sample.ids, skip_special_tokens=True)
        assert sample.text == drawn[: drawn.index("s")]  # the text is cut before the stop ...
        assert "s" not in tokenizer.decode(sample.ids[:-1], skip_special_tokens=True)
        assert len(sample.ids) == sample.tokens  # ... its last token completed it, no end after
    rows = sample_rows([prompt], samples, 64)
    for row, sample in zip(rows, samples, strict=True):
        assert row.input_ids == (*prompt, *sample.ids)
        assert row.labels == (IGNORE_INDEX,) * len(prompt) + sample.ids


def test_a_training_batch_holds_the_groups_advantages(inputs: Path) -> None:
    run = base_run(inputs, num_generations=4)
    batch = run.batch([0, 1, 2], torch.Generator().manual_seed(0))
    assert batch["input_ids"].shape[0] == 12
    assert torch.equal(run.batch([0, 1, 2], torch.Generator().manual_seed(0))["input_ids"],
                       batch["input_ids"])  # fmt: skip
    groups = batch["advantages"].view(3, 4)
    torch.testing.assert_close(groups.sum(1), torch.zeros(3), atol=1e-4, rtol=0)
    rewards = torch.tensor(run.sampled[-12:]).view(3, 4)
    assert torch.equal(groups > 0, rewards > rewards.mean(1, keepdim=True))
    tokens = batch["completion_mask"].sum(1)  # the one token drawn: a word, [EOS], [PAD] ...
    assert (tokens == 1).all()
    loss = run.loss(batch)
    assert loss.requires_grad and torch.isfinite(loss)


def test_the_built_in_rewards() -> None:
    exact, numeric = get_reward("exact"), get_reward("numeric")
    assert exact(" The Eiffel tower.", "eiffel Tower") == 1.0
    assert exact("Eiffel tower, Paris", "Eiffel Tower") == 0.0
    assert numeric(" 1,024 apples, not 3", "1024") == 1.0
    assert numeric("2.50", "2.5") == 1.0 and numeric("-3", "3") == 0.0
    assert numeric("no number", "7") == 0.0
    assert get_reward("format")(" one short line ", None) == 1.0
    assert get_reward("format")("two\nlines", None) == 0.0
    assert reward_for("format", r"\d+")("42", None) == 1.0
    assert FormatRule(r"\d+")("42 is it", None) == 0.0
    with pytest.raises(ValueError, match="twice"):
        register_reward("exact", lambda completion, answer: 1.0)
    register_reward("test-text-reward", lambda completion, answer: "1")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="return a number"):
        get_reward("test-text-reward")("a", None)


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        (["--num-generations", "1"], "num_generations"),
        (["--epsilon", "1.5"], "epsilon"),
        (["--epsilon-high", "0"], "epsilon_high must be above 0"),
        (["--epsilon-high", "-0.1"], "epsilon_high"),
        (["--num-iterations", "0"], "num_iterations"),
        (["--num-iterations", "2", "--checkpoint-every", "3"], "multiple of 2"),
        (["--temperature", "0"], "temperature"),
        (["--beta", "-0.1"], "beta"),
        (["--reward", "nope"], "unknown reward 'nope'"),
        (["--scale-rewards", "median"], "scale_rewards"),
        (["--loss", "sigmoid"], "loss"),
        (["--format-pattern", "x+"], "format_pattern"),
        (["--reward", "format", "--format-pattern", "("], "format_pattern"),
        (["--metric", "bleu"], "bleu"),
        (["--reward", "numeric"], "holds no number"),
        (["--simpo-gamma", "1"], "--simpo-gamma"),
    ],
)
def test_a_bad_option_is_refused(
    option: list[str], needle: str, inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "train",
        "--model",
        str(inputs / "tiny-words"),
        "--data",
        str(inputs / "questions.jsonl"),
    ]
    with unchanged(tmp_path):
        refused(
            [*args, "--task", "grpo", *option, *TRAIN, "--out", str(tmp_path / "x")], capsys, needle
        )


def test_a_grpo_option_on_another_task_is_refused(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sums = tmp_path / "sums.jsonl"
    sums.write_text(json.dumps({"prompt": "is 1 ?", "completion": "yes"}) + "\n")
    args = ["train", "--model", str(inputs / "tiny-words"), "--data", str(sums), "--task", "sft"]
    with unchanged(inputs):
        refused(
            [*args, "--reward", "exact", *TRAIN, "--out", str(tmp_path / "x")], capsys, "--reward"
        )


def test_the_task_checks_its_options_as_its_runs_do() -> None:
    """A study checks a data entry's options by the task's `settings`, before any run."""
    task = get_task("grpo")
    settings = task.settings({"task": "grpo", "reward": "numeric", "max_new_tokens": 4})
    assert settings.max_new_tokens == 4
    with pytest.raises(ConfigError, match="num_generations"):
        task.settings({"task": "grpo", "num_generations": 1})
    with pytest.raises(ConfigError, match="unknown reward"):
        task.settings({"task": "grpo", "reward": "nope"})
