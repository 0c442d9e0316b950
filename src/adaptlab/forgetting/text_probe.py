"""`text:NAME`: perplexity on held-out general text, a built-in probe text
(`adaptlab.data.probe_text`) or a UTF-8 .txt file (documents apart by blank lines).

The documents are tokenised, joined by the end-of-text token and cut into windows of the same
length (the remainder dropped), so every item weighs the same and the mean NLL over items is
the corpus's: the forgetting is log(adapted perplexity / base perplexity). `limit` windows are
drawn (seeded) when there are more.
"""

from __future__ import annotations

import random
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.data.probe_text import PROBE_TEXTS, probe_documents
from adaptlab.data.readers import decode_utf8, read_bytes
from adaptlab.errors import DataError
from adaptlab.forgetting.loss_probe import LossProbe
from adaptlab.forgetting.options import ProbeOptions


def text_probe(value: str, tokenizer: PreTrainedTokenizerBase, options: ProbeOptions) -> LossProbe:
    """The probe of the built-in text or file `value`."""
    documents = _documents(value)
    ids = text_windows(documents, tokenizer, options.window)
    if not ids:
        raise DataError(
            f"probe text:{value} holds fewer than {options.window} tokens; give more text"
        )
    if len(ids) > options.limit:
        chosen = sorted(random.Random(options.seed).sample(range(len(ids)), options.limit))
        ids = [ids[i] for i in chosen]
    examples = [EncodedExample(window, window) for window in ids]
    return LossProbe(f"text:{value}", examples, options.batch_size)


def text_windows(
    documents: list[str], tokenizer: PreTrainedTokenizerBase, length: int
) -> list[tuple[int, ...]]:
    """`documents` tokenised (no special tokens), each followed by the end-of-text token, in
    one stream cut into windows of `length` tokens."""
    end = tokenizer.eos_token_id
    stream: list[int] = []
    for ids in tokenizer(documents, add_special_tokens=False)["input_ids"]:
        stream += [*ids, end] if end is not None else ids
    return [tuple(stream[i : i + length]) for i in range(0, len(stream) - length + 1, length)]


def _documents(value: str) -> list[str]:
    """The built-in probe text `value`, else the documents of the .txt file it names."""
    if value in PROBE_TEXTS:
        return probe_documents(value)
    path = Path(value).expanduser()
    if path.suffix != ".txt" or not path.is_file():
        known = ", ".join(PROBE_TEXTS)
        raise DataError(
            f"probe text:{value} is neither a built-in probe text ({known}) nor a .txt file"
        )
    text = decode_utf8(read_bytes(path), path)
    documents = [part.strip() for part in text.split("\n\n")]
    found = [document for document in documents if document]
    if not found:
        raise DataError(f"probe text:{value}: {path} holds no text; give a file of documents")
    return found
