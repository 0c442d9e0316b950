"""A trained preference or reward adapter scored on a split of preference-family data
(`adaptlab eval`), as its run scored its test. A preference adapter: the pairs' loss and
implicit rewards, with the reference the adapter trained against (the base, or the adapters it
is stacked on), and the `sft` metrics of the answers it generates against the chosen
(desirable) ones; a reward model: its pairwise accuracy and margin. The implicit rewards take
the beta given (`--beta`), else the task's default: give the one the adapter trained with.
Chats are rendered with the adapter's template (its manifest's, `kept_template`) unless a
template file is given."""

from __future__ import annotations

from adaptlab.runs.generative_evaluation import AnswerScoring, Generation, Scored
from adaptlab.runs.generative_trained import SplitRequest, SplitScores
from adaptlab.runs.kto_objective import KtoLm
from adaptlab.runs.preference_data import Reading, encode_judged, encode_preferences
from adaptlab.runs.preference_objective import PreferenceLm
from adaptlab.runs.reward_objective import RewardPairs
from adaptlab.runs.reward_run import encode_reward_data
from adaptlab.tasks.kto import UnpairedPreference
from adaptlab.tasks.preference import PreferenceTask
from adaptlab.tasks.preference_settings import PreferenceSettings
from adaptlab.tasks.reward import RewardModel, RewardSettings


def score_preferences(task: PreferenceTask, request: SplitRequest) -> SplitScores:
    """The requested split scored by the adapter's model as its task scores dev and test."""
    settings = PreferenceSettings.of(request.options, task)
    scoring = AnswerScoring(
        task.primary_metric, Generation.of(settings.generative), request.batch_size
    )
    reading = Reading(request.max_length, template=request.kept)
    data = request.data
    model, tokenizer = request.loaded.model, request.loaded.tokenizer
    if isinstance(task, UnpairedPreference):
        judged = encode_judged(data, task, settings, tokenizer, reading)
        part = judged.splits[request.split]
        kto = KtoLm(model, tokenizer, settings, (), part, scoring)
        return SplitScores(judged.name, len(part.answers), kto.score(part))
    pairs = encode_preferences(data, task, settings, tokenizer, reading)
    chosen = pairs.splits[request.split]
    scorer = PreferenceLm(model, tokenizer, task, settings, (), chosen, scoring)
    return SplitScores(pairs.name, len(chosen.pairs), scorer.score(chosen))


def score_rewards(task: RewardModel, request: SplitRequest) -> SplitScores:
    """The requested split's pairs scored by a reward adapter's model as its run scored test:
    pairwise accuracy, margin and the two sides' mean scores."""
    settings = RewardSettings.of(request.options)
    reading = Reading(request.max_length, template=request.kept)
    loaded = request.loaded
    encoded = encode_reward_data(request.data, task, settings, loaded.tokenizer, reading)
    pairs = encoded.splits[request.split]
    scorer = RewardPairs(
        loaded.model, (), pairs,
        pad_id=loaded.tokenizer.pad_token_id, center_coefficient=settings.center_coefficient,
        eval_batch_size=request.batch_size,
    )  # fmt: skip
    scored = scorer.score(pairs)
    return SplitScores(encoded.name, len(pairs), Scored(scored.loss, scored.metrics))
