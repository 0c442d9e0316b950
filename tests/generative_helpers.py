"""Tiny decoders and data for the generative tasks' tests: a random Llama whose tokenizer ends
texts with an EOS token and renders chats, and small prompt -> completion and chat files."""

from __future__ import annotations

import json
from pathlib import Path

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
