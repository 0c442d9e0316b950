"""Forgetting: what adaptation lost of what the base model could do, measured on source probes
(held-out text, facts, lm-eval tasks, generative data) scored on the base and the adapted model
with the same code. It reads `analysis`' output folders and `knowledge`'s facts, so it sits
above both. See docs/forgetting.md."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.forgetting.api import forgetting_analysis
    from adaptlab.forgetting.measure import measure_forgetting
    from adaptlab.forgetting.options import ProbeOptions
    from adaptlab.forgetting.paired import Forgetting, ItemScores, paired_forgetting
    from adaptlab.forgetting.probe import Probe, ProbedModel
    from adaptlab.forgetting.probes import PROBE_KINDS, build_probes, default_probes

__all__ = [
    "PROBE_KINDS",
    "Forgetting",
    "ItemScores",
    "Probe",
    "ProbeOptions",
    "ProbedModel",
    "build_probes",
    "default_probes",
    "forgetting_analysis",
    "measure_forgetting",
    "paired_forgetting",
]

lazy_face(__name__)
