"""`chat`: fine-tuning on conversations (OpenAI-style `messages` lists), rendered with the
tokenizer's chat template (or `chat_template`, a file's), the loss on every assistant turn
only unless `train_on_prompt`. Dev and test generate the last assistant turn from what comes
before it and score it; ROUGE-L judges by default, any generative metric by `metric`. The
template is kept in the adapter's manifest, so `adaptlab serve` renders chats as training
did."""

from __future__ import annotations

from adaptlab.tasks.generation_metrics import GENERATION_METRICS
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import PERPLEXITY
from adaptlab.tasks.registry import register_task


class ChatFineTuning(GenerativeTask):
    """A decoder taught to take the assistant's turns of conversations."""

    name = "chat"
    summary = "multi-turn chat fine-tuning of a decoder, the loss on the assistant's turns"
    primary_metric = "rougeL"
    metrics = GENERATION_METRICS
    paired_metrics = ("rougeL", PERPLEXITY)
    data_shape = "messages"
    data_marker = "chat"
    data_options = ("train_on_prompt", "chat_template", "pack", "max_new_tokens", "stop", "metric")


CHAT = register_task(ChatFineTuning())
