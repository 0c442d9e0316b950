"""A GRPO run's data read and encoded: the questions of every split (prompt-only data, sampled and
capped as a run samples and caps generative data), each prompt as the token ids generation
starts from (`adaptlab.data.preference_encoding.PreferenceEncoder.prompt_ids`: a text prompt's
own tokens, a conversation rendered by the chat template with the assistant's turn opened, cut
from the left to `max_length - 1` tokens), its text, and its reference answer; the answers are
checked against what the run's reward reads before any work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from adaptlab.data.generative import capped_test, sample_corpus
from adaptlab.data.preference import Question
from adaptlab.data.preference_encoding import PreferenceEncoder
from adaptlab.data.preference_loading import load_preferences
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import ConfigError, DataError
from adaptlab.records.spec import RunSpec
from adaptlab.tasks.grpo import EXACT_MATCH, GroupRelativePolicy
from adaptlab.tasks.grpo_settings import GrpoSettings
from adaptlab.tasks.registry import LABELLED

CHAT_PLACEHOLDER = "…"
"""The assistant's answer a conversation's prompt is rendered with when it has no reference
(the prompt's ids are those before the answer, so its text does not matter)."""


@dataclass(frozen=True)
class QuestionSplit:
    """A split's prompts as generation starts from them, their texts, their reference answers."""

    prompts: Sequence[Sequence[int]]
    texts: Sequence[str]
    answers: Sequence[str | None]

    def __len__(self) -> int:
        return len(self.prompts)


@dataclass(frozen=True)
class EncodedQuestions:
    """Every split encoded, where its questions came from, and the chat template conversations
    were rendered with (None: no conversation, or the tokenizer's)."""

    name: str
    description: str
    splits: Mapping[str, QuestionSplit]
    origins: Mapping[str, tuple[Origin | None, ...]] | None
    chat_template: str | None = None

    @property
    def dropped(self) -> dict[str, int]:
        """None left out: a prompt is cut to fit, never dropped."""
        return dict.fromkeys(self.splits, 0)


def encode_questions(
    spec: RunSpec,
    task: GroupRelativePolicy,
    settings: GrpoSettings,
    tokenizer: PreTrainedTokenizerBase,
) -> EncodedQuestions:
    """`spec`'s data read as questions and their prompts encoded in its `max_length`; training
    sampled to its `train_size` and the test capped to its `test_size`, both with its seed."""
    corpus = load_preferences(spec.data, LABELLED, shape=task.data_shape)
    seed = spec.train.seed
    if spec.train_size is not None:
        corpus = sample_corpus(corpus, spec.train_size, seed)
    if spec.test_size is not None:
        corpus = capped_test(corpus, spec.test_size, seed)
    template = settings.generative.chat_template_or(None)
    encoder = PreferenceEncoder(tokenizer, spec.train.max_length, chat_template=template)
    splits: dict[str, QuestionSplit] = {}
    conversations = False
    for name in SPLIT_NAMES:
        questions = corpus.splits[name]
        if not questions:
            raise DataError(f"the {name} split of {corpus.name} has no question")
        for question in questions:
            if not isinstance(question, Question):
                raise DataError(
                    f"{corpus.name} holds {type(question).__name__} rows, not questions"
                )
        asked = [q for q in questions if isinstance(q, Question)]
        answers = [q.answer for q in asked]
        settings.reward.check_answers(answers, f"the {name} split of {corpus.name}")
        if settings.metric == EXACT_MATCH and name != "train" and None in answers:
            raise ConfigError(
                f"exact_match judges answers against references, and the {name} split of "
                f"{corpus.name} has questions without one; judge by the reward (drop --metric)"
            )
        conversations = conversations or any(not isinstance(q.prompt, str) for q in asked)
        prompts = [encoder.prompt_ids(q.prompt, answer_placeholder(q)) for q in asked]
        splits[name] = QuestionSplit(prompts, tokenizer.batch_decode(prompts), answers)
    chat = None
    if conversations:
        chat = template.text if template is not None else tokenizer.chat_template
    return EncodedQuestions(corpus.name, corpus.description, splits, corpus.origins, chat)


def answer_placeholder(question: Question) -> str:
    """The answer a prompt is encoded before: none after a text (its own tokens), the reference
    or a placeholder in a conversation (an assistant turn must have text)."""
    if isinstance(question.prompt, str):
        return ""
    return question.answer if question.answer and question.answer.strip() else CHAT_PLACEHOLDER
