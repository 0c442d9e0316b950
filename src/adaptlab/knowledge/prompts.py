"""Fact prompts as token queries: the input ids, the answer position and the answer token."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge.lm import KnowledgeLM

SUBJECT, OBJECT = "[X]", "[Y]"
_END_PUNCTUATION = ("", ".", "?", "!")


@dataclass(frozen=True)
class TokenQuery:
    """One answer token to predict: the model reads `input_ids`, `target` is due at `position`."""

    input_ids: torch.Tensor  # (length,)
    position: int
    target: int


def check_template(template: str, causal: bool = False) -> None:
    """A template has one [X] and one [Y]; for causal LMs [Y] ends it (a final . ? ! aside)."""
    if template.count(SUBJECT) != 1 or template.count(OBJECT) != 1:
        raise ConfigError(f"template {template!r} needs exactly one {SUBJECT} and one {OBJECT}")
    if causal and template.split(OBJECT)[1].strip() not in _END_PUNCTUATION:
        raise ConfigError(
            f"template {template!r}: a causal LM predicts what comes next, so {OBJECT} must end it"
        )


def answer_ids(lm: KnowledgeLM, template: str, answer: str) -> list[int]:
    """The answer's tokens as they follow the text before [Y] (with its space, if any)."""
    before = template.split(OBJECT)[0]
    space = " " if before.endswith(" ") else ""
    ids = lm.tokenizer(space + answer, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ConfigError(f"answer {answer!r} tokenizes to nothing")
    return list(ids)


def token_queries(lm: KnowledgeLM, template: str, subject: str, answer: str) -> list[TokenQuery]:
    """One query per answer token.

    Causal LMs read the prompt up to [Y] plus the gold answer tokens before the one predicted
    (teacher forcing). Masked LMs read the prompt with one mask per answer token; each query
    predicts one mask while the others stay masked.
    """
    check_template(template, causal=lm.kind == "causal")
    text = template.replace(SUBJECT, subject)
    before, after = text.split(OBJECT)
    answer_tokens = answer_ids(lm, template, answer)
    if lm.kind == "causal":
        prompt = lm.tokenizer(before[:-1] if before.endswith(" ") else before)["input_ids"]
        queries = []
        for j, target in enumerate(answer_tokens):
            ids = torch.tensor([*prompt, *answer_tokens[:j]], device=lm.model.device)
            queries.append(TokenQuery(ids, len(ids) - 1, target))
        return queries
    mask = lm.tokenizer.mask_token
    assert isinstance(mask, str)
    ids = torch.tensor(
        lm.tokenizer(before + " ".join([mask] * len(answer_tokens)) + after)["input_ids"],
        device=lm.model.device,
    )
    positions = (ids == lm.tokenizer.mask_token_id).nonzero().flatten().tolist()
    if len(positions) != len(answer_tokens):
        raise ConfigError(f"template {template!r}: the mask tokens did not survive tokenization")
    return [TokenQuery(ids, p, t) for p, t in zip(positions, answer_tokens, strict=True)]
