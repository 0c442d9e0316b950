"""Fact prompts as token queries: the input ids, the answer position and the answer token."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from adaptlab.checks import shown
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


def _longest_input(
    lm: KnowledgeLM, template: str, subject: str, answer: str
) -> tuple[list[int], list[int]]:
    """The longest input a fact's queries read, and the answer's tokens.

    The subject is put into the template's two parts around [Y], so a subject that holds
    "[Y]" is text like any other.
    """
    check_template(template, causal=lm.kind == "causal")
    head, tail = template.split(OBJECT)
    before, after = head.replace(SUBJECT, subject), tail.replace(SUBJECT, subject)
    answer_tokens = answer_ids(lm, template, answer)
    if lm.kind == "causal":
        prompt = lm.tokenizer(before[:-1] if before.endswith(" ") else before)["input_ids"]
        return [*prompt, *answer_tokens[:-1]], answer_tokens
    mask = lm.tokenizer.mask_token
    assert isinstance(mask, str)
    masks = " ".join([mask] * len(answer_tokens))
    return list(lm.tokenizer(before + masks + after)["input_ids"]), answer_tokens


def input_length(lm: KnowledgeLM, template: str, subject: str, answer: str) -> int:
    """Tokens the fact's longest query reads: what must fit the model's window."""
    return len(_longest_input(lm, template, subject, answer)[0])


def token_queries(lm: KnowledgeLM, template: str, subject: str, answer: str) -> list[TokenQuery]:
    """One query per answer token.

    Causal LMs read the prompt up to [Y] plus the gold answer tokens before the one predicted
    (teacher forcing). Masked LMs read the prompt with one mask per answer token; each query
    predicts one mask while the others stay masked.
    """
    longest, answer_tokens = _longest_input(lm, template, subject, answer)
    if lm.kind == "causal":
        prompt = len(longest) - len(answer_tokens) + 1
        queries = []
        for j, target in enumerate(answer_tokens):
            ids = torch.tensor(longest[: prompt + j], device=lm.model.device)
            queries.append(TokenQuery(ids, len(ids) - 1, target))
        return queries
    ids = torch.tensor(longest, device=lm.model.device)
    positions = (ids == lm.tokenizer.mask_token_id).nonzero().flatten().tolist()
    if len(positions) != len(answer_tokens):
        raise ConfigError(
            f"template {template!r} with subject {shown(subject)}: the prompt holds "
            f"{len(positions)} mask tokens where the answer needs {len(answer_tokens)}; the "
            f"template and subject must not hold {lm.tokenizer.mask_token!r}"
        )
    return [TokenQuery(ids, p, t) for p, t in zip(positions, answer_tokens, strict=True)]
