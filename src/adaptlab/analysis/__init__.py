"""Analysis layer: what adaptation changed (per-layer RSA / CKA against the base model, loss
landscapes, after paper-effectiveness §2.2 and §5; the spectrum of weight updates). See
docs/analysis.md."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.analysis.api import (
        Written,
        fusion_analysis,
        landscape_analysis,
        similarity_analysis,
        spectrum_analysis,
    )
    from adaptlab.analysis.cka import linear_cka
    from adaptlab.analysis.features import layer_features, layer_names
    from adaptlab.analysis.landscape import Landscape, alphas, loss_landscape
    from adaptlab.analysis.rsa import rsa
    from adaptlab.analysis.similarity import (
        MEASURES,
        LayerScores,
        base_and_adapted,
        compare_to_base,
    )
    from adaptlab.analysis.spectrum import UpdateSpectrum, update_spectrum
    from adaptlab.analysis.target import Target, load_target
    from adaptlab.analysis.tokens import TokenSample, eligible_tokens, sample_tokens
    from adaptlab.analysis.updates import WeightUpdate, weight_updates

__all__ = [
    "MEASURES",
    "Landscape",
    "LayerScores",
    "Target",
    "TokenSample",
    "UpdateSpectrum",
    "WeightUpdate",
    "Written",
    "alphas",
    "base_and_adapted",
    "compare_to_base",
    "eligible_tokens",
    "fusion_analysis",
    "landscape_analysis",
    "layer_features",
    "layer_names",
    "linear_cka",
    "load_target",
    "loss_landscape",
    "rsa",
    "sample_tokens",
    "similarity_analysis",
    "spectrum_analysis",
    "update_spectrum",
    "weight_updates",
]

lazy_face(__name__)
