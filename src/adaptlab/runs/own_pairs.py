"""A model's own wrong answers made into preference pairs (the on-policy pairs DPO is meant
for, Rafailov et al. 2023 §4: preferences over the model's own samples): each question is
answered greedily by the serving engine, and each answer that exact match judges wrong is
rejected against the question's reference (`adaptlab.data.preference.pairs_from_answers`)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.preference import Preference, Question, pairs_from_answers
from adaptlab.data.preference_encoding import PreferenceEncoder
from adaptlab.runs.generative_evaluation import generate_answers
from adaptlab.runs.grpo_data import answer_placeholder


def own_answer_pairs(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[Question],
    *,
    max_length: int,
    chat_template: ChatTemplate | None,
    max_new_tokens: int,
    stop: Sequence[str],
    batch_size: int,
) -> list[Preference]:
    """The pairs of `questions` (each with a reference) that `model` answers wrong: a text
    prompt's own tokens, a conversation rendered by `chat_template` (None: the tokenizer's)
    with the assistant's turn opened, cut from the left to `max_length - 1` tokens."""
    encoder = PreferenceEncoder(tokenizer, max_length, chat_template=chat_template)
    prompts = [encoder.prompt_ids(q.prompt, answer_placeholder(q)) for q in questions]
    answers = generate_answers(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens,
        stop=stop,
        batch_size=batch_size,
    )
    return pairs_from_answers(questions, answers)
