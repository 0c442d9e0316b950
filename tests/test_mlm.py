"""Masked-language modelling: texts, BERT masking, the masked-positions head, language adapters
trained by MLM, stacked under a task adapter and swapped at test time (MAD-X)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import torch
import transformers as T
from cli_cases import run_cli
from tiny_models import save_tiny_bert, tiny_config

import adaptlab
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative import sample_corpus
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.data.texts import load_texts
from adaptlab.engine.restore import load_trained
from adaptlab.engine.stack_swap import parse_swaps, stack_swapped
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods import list_adapters
from adaptlab.methods.compose import MethodSpec
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import read_result
from adaptlab.runs.mlm_objective import hidden_states_at, masked_lm_loss, masked_lm_scores
from adaptlab.runs.run import RunSpec, execute
from adaptlab.tasks.registry import LABELLED

ENGLISH = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "big", "red", "blue"]
OTHER = ["en", "film", "je", "bil", "zelo", "lep", "dolg", "pes", "mačka"]
MOODS = {"fresh": ["great", "lovely", "superb"], "rotten": ["dull", "awful", "boring"]}


def documents(words: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(10)) for _ in range(count)]


def write_reviews(path: Path, rows: int, opener: str) -> Path:
    rng = random.Random(rows)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = "fresh" if i % 2 else "rotten"
            writer.writerow([f"{opener} {rng.choice(MOODS[label])} film", label])
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny BERT encoder without an MLM head (as a sentence encoder ships), MiniLM's tokenizer."""
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="module")
def tokenizer(tiny_bert: str) -> T.PreTrainedTokenizerBase:
    return T.AutoTokenizer.from_pretrained(tiny_bert)


def mlm_spec(
    model: str, data: Path, method: MethodSpec = "pfeiffer", **settings: object
) -> RunSpec:
    train = TrainConfig(epochs=2, batch_size=16, learning_rate=1e-2, seed=0)
    return RunSpec.build(
        model, str(data), method, train=train, data_options={"task": "mlm"}, **settings
    )


MADX_LANGUAGE = {"pfeiffer": {"invertible": True}}
"""MAD-X's language adapter: a Pfeiffer adapter with an invertible adapter on the embeddings."""


@pytest.fixture(scope="module")
def madx(tiny_bert: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two language adapters trained by MLM and a task adapter stacked on the first."""
    root = tmp_path_factory.mktemp("madx")
    (root / "en.txt").write_text("\n".join(documents(ENGLISH, 120, 0)))
    (root / "sl.txt").write_text("\n".join(documents(OTHER, 120, 1)))
    reviews = write_reviews(root / "reviews.csv", 80, "a")
    write_reviews(root / "reviews-sl.csv", 60, "en")
    execute(mlm_spec(tiny_bert, root / "en.txt", MADX_LANGUAGE), root / "lang-en", progress=False)
    execute(mlm_spec(tiny_bert, root / "sl.txt", MADX_LANGUAGE), root / "lang-sl", progress=False)
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-2, seed=0)
    task = RunSpec.build(
        tiny_bert, str(reviews), "pfeiffer", train=train, stack=(str(root / "lang-en"),)
    )
    execute(task, root / "task", progress=False)
    return {
        name: root / name for name in ("lang-en", "lang-sl", "task", "reviews-sl.csv", "en.txt")
    }


# --- texts ---


def test_a_text_file_is_one_document_a_line_split_80_10_10(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(f"document {i}" for i in range(50)) + "\n\n   \n")
    corpus = load_texts(str(path), LABELLED)
    # the labelled-data rule: one document kept for train, then 10% dev and 10% test
    assert {k: len(v) for k, v in corpus.splits.items()} == {"train": 41, "dev": 5, "test": 4}
    every = [t for split in corpus.splits.values() for t in split]
    assert sorted(every) == sorted(f"document {i}" for i in range(50))
    sampled = sample_corpus(corpus, 10, seed=3, unit="documents")
    assert len(sampled.splits["train"]) == 10 and len(sampled.splits["dev"]) == 5
    assert set(sampled.splits["train"]) <= set(corpus.splits["train"])
    assert sampled.splits["test"] == corpus.splits["test"]


def test_only_newlines_end_a_document(tmp_path):
    path = tmp_path / "corpus.txt"
    lines = [f"line {i} with\u2028a separator\x0cand a \x85 inside" for i in range(20)]
    path.write_text("\r\n".join(lines), newline="")
    corpus = load_texts(str(path), LABELLED)
    assert sorted(t for split in corpus.splits.values() for t in split) == sorted(lines)


def test_a_data_files_text_column_is_read_without_a_label_column(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("body,other\n" + "".join(f"note {i},x\n" for i in range(20)))
    corpus = load_texts(str(path), LABELLED, text_column="body")
    assert sum(map(len, corpus.splits.values())) == 20
    with pytest.raises(DataError, match="column 'text' not found"):
        load_texts(str(path), LABELLED)
    with pytest.raises(ConfigError, match="reads only text; drop label-column"):
        load_texts(str(path), LABELLED, text_column="body", label_column="other")
    with pytest.raises(DataError, match="unknown text source 'nowhere.txt'"):
        load_texts("nowhere.txt", LABELLED)


# --- masking ---


def test_bert_masking_shares_and_labels(tokenizer):
    encoder = MaskedLmEncoder(tokenizer, max_length=64)
    features = encoder.encode(documents(ENGLISH, 400, 2))
    batch = encoder.collate(features, torch.Generator().manual_seed(0))
    original = encoder.collate(features, torch.Generator().manual_seed(0))
    assert torch.equal(batch["input_ids"], original["input_ids"])  # seeded: the same masks
    plain = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(f["input_ids"]) for f in features], batch_first=True, padding_value=0
    )
    special = (
        torch.isin(plain, torch.tensor(tokenizer.all_special_ids)) | ~batch["attention_mask"].bool()
    )
    chosen = batch["labels"].ne(IGNORE_INDEX)
    assert not (chosen & special).any()
    assert torch.equal(batch["labels"][chosen], plain[chosen])
    share = chosen.sum() / (~special).sum()
    assert 0.13 < share < 0.17
    ids = batch["input_ids"][chosen]
    masked = (ids == tokenizer.mask_token_id).float().mean()
    kept = (ids == plain[chosen]).float().mean()
    assert 0.76 < masked < 0.84 and 0.07 < kept < 0.14  # 80% [MASK], ~10% kept (+ chance)
    assert torch.equal(batch["input_ids"][~chosen], plain[~chosen])


def test_a_tiny_batch_still_predicts_one_token(tokenizer):
    encoder = MaskedLmEncoder(tokenizer, max_length=8, mask_share=0.01)
    batch = encoder.collate(encoder.encode(["the cat"]), torch.Generator().manual_seed(0))
    assert batch["labels"].ne(IGNORE_INDEX).sum() == 1


# --- the head on masked positions only ---


@pytest.mark.parametrize("arch", ["bert", "xlm-roberta", "distilbert", "mpnet", "electra"])
def test_head_on_masked_positions_gives_the_full_forwards_logits(arch):
    torch.manual_seed(0)
    model = T.AutoModelForMaskedLM.from_config(tiny_config(arch)).eval()
    ids = torch.randint(5, 100, (3, 9), generator=torch.Generator().manual_seed(1))
    chosen = torch.zeros_like(ids, dtype=torch.bool)
    chosen[0, 2] = chosen[1, 5] = chosen[2, 0] = chosen[2, 8] = True
    with torch.no_grad():
        full = model(input_ids=ids).logits
        with hidden_states_at(model, chosen):
            picked = model(input_ids=ids).logits
    assert picked.shape == (1, 4, full.shape[-1])
    torch.testing.assert_close(picked[0], full[chosen], rtol=1e-5, atol=1e-5)
    labels = ids.masked_fill(~chosen, IGNORE_INDEX)
    batch = {"input_ids": ids, "labels": labels}
    scores = masked_lm_scores(model, batch)
    expected = torch.nn.functional.cross_entropy(full[chosen], ids[chosen])
    assert int(scores.count) == 4
    right = int((full[chosen].argmax(-1) == ids[chosen]).sum())
    top2 = full[chosen].topk(2, dim=-1).values
    near_ties = int((top2[:, 0] - top2[:, 1] < 1e-4).sum())  # another CPU may round otherwise
    assert near_ties == 0 and int(scores.correct) == right
    torch.testing.assert_close(scores.total, expected * 4)
    torch.testing.assert_close(masked_lm_loss(model, batch), expected)


def test_a_language_adapters_head_leaves_the_tied_embeddings_frozen():
    torch.manual_seed(0)
    model = T.AutoModelForMaskedLM.from_config(tiny_config("bert"))
    handle = adaptlab.adapt(model, "pfeiffer")
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight is embeddings and not embeddings.requires_grad
    head = handle.groups["head"]
    assert "bert.embeddings.word_embeddings.weight" not in head
    assert "cls.predictions.transform.dense.weight" in head and "cls.predictions.bias" in head
    assert model.cls.predictions.transform.dense.weight.requires_grad


# --- language adapters, stacked and swapped ---


def test_a_masked_lm_run_writes_a_language_adapter(madx):
    result = read_result(madx["lang-en"] / "metrics.json")
    assert result.data.task == "mlm" and result.metric == "masked_accuracy"
    assert sum(result.data.sizes.values()) == 120 and result.data.sizes["dev"] >= 11
    assert set(result.test) == {"masked_accuracy", "perplexity"}
    assert result.epochs[-1].train_loss < result.epochs[0].train_loss
    assert result.parameter_groups["head"] < result.total_parameters / 10  # no embeddings
    manifest = json.loads((madx["lang-en"] / "adapter" / "manifest.json").read_text())
    assert manifest["task"] == "mlm" and manifest["base_model"]["class"] == "BertForMaskedLM"
    assert manifest["methods"][0]["config"]["invertible"] is True


def test_the_task_adapter_runs_stacked_and_the_language_adapter_swaps(madx, tiny_bert):
    loaded, manifest = load_trained(madx["task"], model=tiny_bert)
    model = loaded.model
    assert manifest["composition"] == {"stack": ["lang-en", "default"]}
    batch = loaded.tokenizer(["a great film", "en dull film"], padding=True, return_tensors="pt")
    with torch.no_grad():
        before = model(**batch).logits
        with stack_swapped(model, parse_swaps([f"lang-en={madx['lang-sl']}"])):
            assert adaptlab.active(model) == adaptlab.Stack("lang-sl", "default")
            swapped = model(**batch).logits
        after = model(**batch).logits
    assert not torch.allclose(before, swapped)
    assert torch.equal(before, after)
    assert list_adapters(model) == ["lang-en", "default"]


def test_swap_errors_are_one_line(madx, tiny_bert):
    loaded, _ = load_trained(madx["task"], model=tiny_bert)
    unknown = [("lang-fr", str(madx["lang-sl"]))]
    with (
        pytest.raises(ConfigError, match="no adapter 'lang-fr' under the task adapter"),
        stack_swapped(loaded.model, unknown),
    ):
        pass
    with pytest.raises(ConfigError, match="is not NAME=FOLDER"):
        parse_swaps(["lang-en"])
    alone, _ = load_trained(madx["lang-sl"], model=tiny_bert)
    with (
        pytest.raises(ConfigError, match="needs an adapter trained stacked on others"),
        stack_swapped(alone.model, [("lang-en", str(madx["lang-sl"]))]),
    ):
        pass


def test_eval_cli_swaps_the_stack_and_scores_masked_lm(madx, tiny_bert, capsys):
    data = str(madx["reviews-sl.csv"])
    common = ["eval", "--adapter", str(madx["task"]), "--model", tiny_bert, "--data", data]
    code, out, _ = run_cli([*common, "--json"], capsys)
    assert code == 0
    plain = json.loads(out)
    code, out, _ = run_cli(
        [*common, "--stack-swap", f"lang-en={madx['lang-sl']}", "--json"], capsys
    )
    assert code == 0
    swapped = json.loads(out)
    assert swapped["examples"] == plain["examples"] and swapped["loss"] != plain["loss"]
    code, _, err = run_cli([*common, "--stack-swap", "lang-en"], capsys)
    assert code == 1 and "is not NAME=FOLDER" in err and "Traceback" not in err
    language = ["eval", "--adapter", str(madx["lang-en"]), "--model", tiny_bert]
    code, out, _ = run_cli([*language, "--data", str(madx["en.txt"]), "--json"], capsys)
    assert code == 0 and set(json.loads(out)) >= {"masked_accuracy", "perplexity", "loss"}
