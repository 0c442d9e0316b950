"""The probe kinds (`text`, `facts`, `harness`, `data`), each a `kind:value` argument, and the
built-in probes a causal LM is scored on when none are named."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from adaptlab.errors import ConfigError
from adaptlab.forgetting.data_probe import data_probe
from adaptlab.forgetting.facts_probe import facts_probe
from adaptlab.forgetting.harness_probe import harness_probe
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.probe import Probe
from adaptlab.forgetting.text_probe import text_probe
from adaptlab.registry import Registry

DEFAULT_TEXT = "fairy-tales"
"""The built-in probe text scored by default (`adaptlab.data.probe_text`)."""

Builder = Callable[[str, PreTrainedTokenizerBase, ProbeOptions], Probe]


@dataclass(frozen=True)
class ProbeKind:
    """A kind of probe: how `kind:value` builds one, and what the value names."""

    name: str
    value: str
    build: Builder


PROBE_KINDS: Registry[ProbeKind] = Registry("probe kind")
for kind in (
    ProbeKind("text", "a built-in probe text or a .txt file", text_probe),
    ProbeKind("facts", "countries or a fact file", lambda v, _, o: facts_probe(v, o)),
    ProbeKind("harness", "an lm-eval task", lambda v, _, o: harness_probe(v, o)),
    ProbeKind("data", "a generative data set (its test split)", data_probe),
):
    PROBE_KINDS.register(kind)


def build_probes(
    names: Sequence[str], tokenizer: PreTrainedTokenizerBase, options: ProbeOptions
) -> list[Probe]:
    """The probes `names` (`kind:value` each), every one checked and its items read before
    any model is scored; a repeated name or an unknown kind is one line naming it."""
    if len(set(names)) != len(names):
        raise ConfigError(f"a probe is named twice in {', '.join(names)}")
    if options.window > tokenizer.model_max_length:
        raise ConfigError(
            f"window {options.window} is longer than the model reads "
            f"({tokenizer.model_max_length} tokens); give a shorter window"
        )
    return [
        PROBE_KINDS.get(kind).build(value, tokenizer, options) for kind, value in map(split, names)
    ]


def split(name: str) -> tuple[str, str]:
    """`kind:value` as (kind, value)."""
    kind, sep, value = name.partition(":")
    if not sep or not value:
        kinds = "; ".join(f"{k.name}:<{k.value}>" for k in PROBE_KINDS)
        raise ConfigError(f"probe {name!r} is not kind:value; probes are {kinds}")
    return kind, value


def default_probes() -> tuple[str, ...]:
    """The built-in probes: general text, the countries' facts and, where lm-eval is
    installed, the built-in multiple-choice tasks."""
    from adaptlab.data.probe_tasks import PROBE_TASKS

    tasks = PROBE_TASKS if importlib.util.find_spec("lm_eval") is not None else ()
    return (f"text:{DEFAULT_TEXT}", "facts:countries", *(f"harness:{t}" for t in tasks))
