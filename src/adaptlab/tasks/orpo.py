"""`orpo`: Odds Ratio Preference Optimization (Hong et al. 2024, Eq. 6-7): no reference; the
chosen answer's negative log-likelihood plus lambda (`beta`) times the log-sigmoid of the log
odds ratio of the chosen answer over the rejected one, so one stage both teaches the answers
and prefers them. lambda 0.1, TRL's `ORPOConfig` default."""

from __future__ import annotations

from adaptlab.tasks.preference import GENERATION_READ, PreferenceTask
from adaptlab.tasks.registry import register_task


class OddsRatioPreference(PreferenceTask):
    """A decoder tuned by ORPO, reference-free."""

    name = "orpo"
    summary = "reference-free preference tuning: the chosen answer's NLL plus an odds-ratio term"
    data_options = ("beta", *GENERATION_READ)
    beta_default = 0.1
    uses_reference = False


ORPO = register_task(OddsRatioPreference())
