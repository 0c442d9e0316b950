"""`data:SOURCE`: a generative data set's test split (a built-in corpus or a file), encoded for
the adapted run's task (`causal-lm`, `sft`, `chat`) as a run encodes it, each example scored by
its target tokens' mean NLL (the answers' for prompt -> answer data, every token for text): what
the base could do on that data, and what the adapted model does. `limit` examples are kept
(seeded, as a run caps its test split)."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from adaptlab.errors import ConfigError
from adaptlab.forgetting.loss_probe import LossProbe
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.runs.generative_data import encode_data
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import get_task, task_names
from adaptlab.tasks.task import Task


def data_probe(value: str, tokenizer: PreTrainedTokenizerBase, options: ProbeOptions) -> LossProbe:
    """The probe of data `value`'s test split, encoded for `options.run_task`."""
    task = _generative(options.run_task)
    settings = GenerativeSettings.of({}, task.name)
    encoded = encode_data(
        task,  # type: ignore[arg-type]  # a generative task (checked above)
        value,
        settings,
        tokenizer,
        options.window,
        test_cap=(options.limit, options.seed),
    )
    examples = encoded.splits["test"].encoded[: options.limit]
    return LossProbe(f"data:{value}", examples, options.batch_size)


def _generative(name: str | None) -> Task:
    """The run's task, which must be generative (a data probe encodes as the run did)."""
    causal = task_names(lambda task: task.model_kind == "causal_lm")
    if name not in causal:
        raise ConfigError(
            f"a data: probe encodes its data for the run's task, and {name or 'this run'} is "
            f"not a causal LM's task ({', '.join(causal)})"
        )
    return get_task(name)
