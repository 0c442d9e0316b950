"""lm-eval's test tasks (tests/data/lm_eval: a two-choice log-likelihood task on reviews, a
short-answer generation task and a group of both) and a tiny random Llama whose word-level
tokenizer knows every word of them, shared by the tests that score with lm-evaluation-harness."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers as T
import yaml
from tiny_models import tiny_config

DATA = Path(__file__).parent / "data" / "lm_eval"
REVIEWS, CAPITALS, SUITE = "adaptlab_reviews", "adaptlab_capitals", "adaptlab_suite"
TASKS = [REVIEWS, CAPITALS]
SPECIAL = ["[PAD]", "<s>", "</s>", "[UNK]"]


def word_llama(folder: Path) -> str:
    """A tiny random Llama whose tokenizer has a word for each word of the task files (and no
    special tokens around a text, so a choice is scored on its own word)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    split = pre_tokenizers.Whitespace()
    texts = ["Review: Sentiment: negative positive Q: A:"]
    for path in DATA.glob("*.jsonl"):
        texts += [
            str(v) for line in path.read_text().splitlines() for v in json.loads(line).values()
        ]
    words = sorted({word.lower() for text in texts for word, _ in split.pre_tokenize_str(text)})
    vocab = {word: index for index, word in enumerate(SPECIAL + words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = split
    tokenizer.decoder = decoders.WordPiece()
    fast = T.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", bos_token="<s>", eos_token="</s>",
        unk_token="[UNK]",
    )  # fmt: skip
    torch.manual_seed(0)
    config = tiny_config("llama")
    config.vocab_size, config.bos_token_id, config.eos_token_id = len(vocab), 1, 2
    T.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def task_folder(folder: Path) -> Path:
    """The task YAML files of tests/data/lm_eval in `folder`, their data files as absolute
    paths (lm-eval reads relative ones from the working directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in DATA.glob("*.yaml"):
        config = yaml.safe_load(path.read_text())
        if "dataset_kwargs" in config:
            files = config["dataset_kwargs"]["data_files"]
            config["dataset_kwargs"]["data_files"] = {
                split: str(DATA / name) for split, name in files.items()
            }
        (folder / path.name).write_text(yaml.safe_dump(config))
    return folder
