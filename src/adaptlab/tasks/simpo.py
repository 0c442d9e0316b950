"""`simpo`: Simple Preference Optimization (Meng et al. 2024, Eq. 6): no reference; the reward
is the length-normalised log-probability of an answer times beta, and the chosen one's must
beat the rejected one's by a margin gamma (`simpo_gamma`). Defaults beta 2.0 and gamma 1.0
(gamma / beta 0.5), in the range the paper searches per model (§4); TRL's `CPOTrainer`
computes the same loss with `loss_type="simpo"` (its defaults, beta 0.1 and gamma 0.5, are
CPO's)."""

from __future__ import annotations

from adaptlab.tasks.preference import GENERATION_READ, PreferenceTask
from adaptlab.tasks.registry import register_task


class SimplePreference(PreferenceTask):
    """A decoder tuned by SimPO, reference-free."""

    name = "simpo"
    summary = "reference-free preference tuning on length-normalised rewards with a margin"
    data_options = ("beta", "simpo_gamma", *GENERATION_READ)
    beta_default = 2.0
    uses_reference = False


SIMPO = register_task(SimplePreference())
