"""`dpo`: Direct Preference Optimization (Rafailov et al. 2023, Eq. 7): the policy's log-ratio
to a reference on the chosen answer pushed above that on the rejected one; `loss` picks the
sigmoid of the paper, IPO's squared loss (Azar et al. 2023, Eq. 17) or SLiC's hinge (Zhao et
al. 2023). The reference is the base with the trained adapter off, or the frozen adapters it is
stacked on (`adaptlab.engine.reference`). beta 0.1 as in TRL's `DPOConfig` and the paper's
dialogue experiments (§6)."""

from __future__ import annotations

from adaptlab.tasks.preference import GENERATION_READ, PreferenceTask
from adaptlab.tasks.registry import register_task


class DirectPreference(PreferenceTask):
    """A decoder tuned by DPO (or IPO, or hinge) against a reference."""

    name = "dpo"
    summary = "direct preference optimisation on chosen / rejected pairs, against a reference"
    data_options = ("beta", "loss", "precompute_reference", *GENERATION_READ)
    beta_default = 0.1


DPO = register_task(DirectPreference())
