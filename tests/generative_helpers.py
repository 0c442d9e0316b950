"""Tiny decoders and data for the generative tasks' tests: a random Llama whose tokenizer ends
texts with an EOS token and renders chats, and small prompt -> completion and chat files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import torch
from serve_helpers import CHAT_TEMPLATE
from tiny_models import save_tiny_llama

from adaptlab.models.loading import load_tokenizer


def tiny_decoder(root: Path) -> str:
    """A tiny random Llama under `root` whose tokenizer has an EOS token ([SEP]) and a chat
    template."""
    folder = save_tiny_llama(str(root / "tiny-decoder"))
    tokenizer = load_tokenizer(folder)
    tokenizer.eos_token = tokenizer.sep_token
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


def greedy(model: Any, ids: list[int], count: int) -> tuple[list[int], torch.Tensor]:
    """`model.generate`'s greedy tokens after `ids` (cut before an end token) and each step's
    logits."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            max_new_tokens=count,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    tokens = out.sequences[0, len(ids) :].tolist()
    ends = {model.generation_config.eos_token_id}
    cut = next((i for i, t in enumerate(tokens) if t in ends), len(tokens))
    return tokens[:cut], torch.cat(out.logits)


def write_jsonl(path: Path, records: list[Any]) -> Path:
    """`records` as JSONL in UTF-8, one JSON value a line."""
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def write_table(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    """`header` and `rows` as a UTF-8 CSV, or a TSV where `path` ends in .tsv."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, delimiter="\t" if path.suffix == ".tsv" else ",")
        writer.writerows([header, *rows])
    return path


def write_pairs(path: Path, count: int = 40) -> Path:
    """`count` prompt -> completion rows of sums, as JSONL."""
    rows = [
        {"prompt": f"what is {i} plus {i % 7} ?", "completion": str(i + i % 7)}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_chats(path: Path, count: int = 30) -> Path:
    """`count` two-turn chats, as JSONL `messages`."""
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"hello {i}"},
                {"role": "assistant", "content": f"hi {i}"},
                {"role": "user", "content": f"double {i} ?"},
                {"role": "assistant", "content": str(2 * i)},
            ]
        }
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_preferences(path: Path, count: int = 60) -> Path:
    """`count` pairs where " yes" is always preferred to " no": easy to learn."""
    rows = [
        {"prompt": f"is {i} a number ?", "chosen": " yes", "rejected": " no"} for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
