"""Chat templates rendered in-process (training, `predict`, `eval`) are bounded as the server's
are: a render that runs past its time bound is stopped, on the main thread and on any other,
and one that writes too much is refused, each in one line naming the template and the bound,
with every input file left as it was; a good template's tokens do not change."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, unchanged
from generative_helpers import write_chats

import adaptlab
from adaptlab.data.chat_render import ChatRenderer, ChatTemplate
from adaptlab.data.generative import Conversation, Turn
from adaptlab.data.generative_encoding import GenerativeEncoder
from adaptlab.data.preference import Preference
from adaptlab.data.preference_encoding import PreferenceEncoder
from adaptlab.data.reward_encoding import RewardEncoder
from adaptlab.data.template_bounds import (
    RENDER_SECONDS,
    Overran,
    rendered_chars,
    time_bound,
)
from adaptlab.errors import ConfigError
from adaptlab.models.loading import load_model, load_tokenizer

SPIN = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    "{{ messages[0]['content'] }}"
)
"""Two nested loops of 100,000: renders for hours."""
UNCLOSED = "{% for m in messages %}{{ m['content'] }}"
"""A loop never closed: Jinja cannot compile it."""
HUGE = "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}{{ messages[0]['content'] }}"
"""Writes 10,000,000 characters, quickly."""
GOOD = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
SMALL_BOUND = 0.2
FINISHED = 60.0
"""Seconds a refused command or render must finish within: far more than the bound, for a
busy machine."""
TRAIN = ["train", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--seed", "0"]
CHAT = ["--task", "chat", "--max-new-tokens", "3", "--no-progress"]
TURNS = (Turn("user", "hello there"), Turn("assistant", "hi"))


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl", 30)
    return tmp_path


def timed(step: Callable[[], Any]) -> float:
    began = time.monotonic()
    step()
    return time.monotonic() - began


def spin_until_stopped() -> None:
    with time_bound(SMALL_BOUND):
        while True:
            pass


def on_thread(step: Callable[[], Any]) -> BaseException | None:
    """What `step` raised on a thread of its own (None: nothing)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            step()
        except BaseException as error:  # the test reads whatever it was
            raised.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(FINISHED)
    assert not worker.is_alive()
    return raised[0] if raised else None


def within_the_bound() -> None:
    with time_bound(SMALL_BOUND):
        pass


def test_a_block_past_its_bound_is_stopped_on_the_main_thread_and_any_other() -> None:
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(Overran):
        spin_until_stopped()
    assert isinstance(on_thread(spin_until_stopped), Overran)
    for _ in range(100):  # blocks within the bound raise nothing, during or after
        within_the_bound()
        assert on_thread(within_the_bound) is None
    time.sleep(2 * SMALL_BOUND)  # a bound left armed would ring here


def test_someone_elses_alarm_is_left_alone() -> None:
    rang: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: rang.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with pytest.raises(Overran):  # bounded by a timer thread instead
            spin_until_stopped()
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30  # still set, not replaced
        assert rang == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_server_and_training_share_the_bounds() -> None:
    from adaptlab.serve.options import ServeOptions

    assert ServeOptions(model="m", adapters="a").max_render_seconds == RENDER_SECONDS
    assert rendered_chars(64) == 1_000_000 and rendered_chars(1_000_000) == 8_000_000


def renderer(decoder: str, template: str, seconds: float = RENDER_SECONDS) -> ChatRenderer:
    tokenizer = load_tokenizer(decoder)
    return ChatRenderer(tokenizer, ChatTemplate(template), window=64, seconds=seconds)


def test_a_looping_template_is_stopped_at_the_bound_in_one_line(decoder: str) -> None:
    chat = renderer(decoder, SPIN, SMALL_BOUND)
    began = time.monotonic()
    with pytest.raises(ConfigError) as refusal:
        chat.text(TURNS)
    assert time.monotonic() - began < FINISHED
    assert str(refusal.value) == (
        "the chat template passed as chat_template took more than 0.2 s to render the "
        "messages; pass a chat template that renders within 0.2 s"
    )
    elsewhere = on_thread(lambda: chat.text(TURNS))
    assert isinstance(elsewhere, ConfigError) and str(elsewhere) == str(refusal.value)


def test_a_template_writing_too_much_is_refused_in_one_line(decoder: str) -> None:
    with pytest.raises(ConfigError) as refusal:
        renderer(decoder, HUGE).text(TURNS)
    written = 10_000_000 + len("hello there")
    assert str(refusal.value) == (
        f"the chat template passed as chat_template rendered the messages as {written:,} "
        "characters; pass a chat template that writes at most 1,000,013 characters"
    )


def test_a_long_chat_may_render_beyond_the_bound_by_its_own_characters(decoder: str) -> None:
    said = "word " * 300_000
    turns = (Turn("user", said), Turn("assistant", said), Turn("user", said))
    text = renderer(decoder, GOOD).text(turns)
    assert len(text) > rendered_chars(64)


@pytest.mark.parametrize("template", [None, GOOD], ids=["tokenizer's", "file's"])
def test_a_good_template_renders_the_same_tokens(decoder: str, template: str | None) -> None:
    tokenizer = load_tokenizer(decoder)
    turns = (Turn("system", "Be brief."), *TURNS, Turn("user", "and?"), Turn("assistant", "no"))
    messages = [{"role": t.role, "content": t.content} for t in turns]

    def ids(upto: int, opened: bool) -> list[int]:
        """The tokens as `apply_chat_template` renders and tokenises them, unbounded."""
        text = tokenizer.apply_chat_template(
            messages[:upto], chat_template=template, add_generation_prompt=opened, tokenize=False
        )
        found: list[int] = tokenizer(str(text), add_special_tokens=False).input_ids
        return found

    chosen = None if template is None else ChatTemplate(template)
    rendered = ChatRenderer(tokenizer, chosen, window=64).render(Conversation(turns))
    assert list(rendered.input_ids) == ids(len(turns), False)
    encoder = GenerativeEncoder(tokenizer, 64, chat_template=chosen)
    assert encoder.prompt_ids(Conversation(turns)) == ids(len(turns) - 1, True)


@pytest.mark.parametrize("template", [SPIN, HUGE], ids=["looping", "huge"])
def test_preference_and_reward_encoders_bound_their_renders(decoder: str, template: str) -> None:
    tokenizer = load_tokenizer(decoder)
    pair = Preference((Turn("user", "hello"),), "yes", "no")
    chosen = ChatTemplate(template)
    preference = PreferenceEncoder(tokenizer, 64, chat_template=chosen)
    reward = RewardEncoder(tokenizer, 64, chat_template=chosen)
    for encode in (preference.pair, reward.pair):
        began = time.monotonic()
        with pytest.raises(ConfigError, match="^the chat template passed as chat_template "):
            encode(pair)
        assert time.monotonic() - began < FINISHED


def test_training_with_a_looping_template_exits_in_one_line(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "spin.jinja").write_text(SPIN)
    given = [*TRAIN, "--model", decoder, "--data", "chats.jsonl", *CHAT, "--out", "run"]
    with unchanged(work):
        seconds = timed(
            lambda: refused(
                [*given, "--chat-template", "spin.jinja"],
                capsys,
                f"the chat template from chat template file {work / 'spin.jinja'} took more "
                f"than {RENDER_SECONDS:g} s to render the messages",
                f"renders within {RENDER_SECONDS:g} s",
            )
        )
    assert seconds < FINISHED
    assert not (work / "run").exists()


def test_training_with_a_template_writing_too_much_exits_in_one_line(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "huge.jinja").write_text(HUGE)
    given = [*TRAIN, "--model", decoder, "--data", "chats.jsonl", *CHAT, "--out", "run"]
    with unchanged(work):
        refused(
            [*given, "--chat-template", "huge.jinja"],
            capsys,
            f"the chat template from chat template file {work / 'huge.jinja'} rendered the "
            "messages as 10,000,00",
            "writes at most 1,000,0",
        )


def chat_adapter(decoder: str, folder: Path, template: str) -> Path:
    """A chat adapter saved in `folder` whose manifest keeps `template`."""
    model = load_model(decoder, "causal_lm").model
    adaptlab.add_adapter(model, "default", "lora", seed=0, train_head=False)
    adaptlab.save_adapter(
        model, folder, base_model_id=decoder, task="chat", label_names=[], chat_template=template
    )
    return folder


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        (SPIN, f"took more than {RENDER_SECONDS:g} s to render the messages"),
        (UNCLOSED, 'cannot render a conversation ("Unexpected end of template'),
    ],
    ids=["looping", "syntax-error"],
)
@pytest.mark.parametrize(
    "command",
    [["predict", "--input", "prompts.txt"], ["eval", "--data", "chats.jsonl"]],
    ids=["predict", "eval"],
)
def test_a_broken_template_from_a_manifest_names_its_adapter_in_one_line(
    command: list[str],
    template: str,
    problem: str,
    decoder: str,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = chat_adapter(decoder, work / "qa-chat", template)
    (work / "prompts.txt").write_text("hello\nhow are you?\n")
    given = [*command, "--adapter", str(folder), "--model", decoder, "--max-new-tokens", "2"]
    with unchanged(work):
        seconds = timed(
            lambda: refused(
                given,
                capsys,
                f"the chat template from the manifest of adapter {folder} {problem}",
                "; the adapter was saved with a broken template: retrain it with one that ",
                ", or pass --chat-template FILE where the command takes one",
            )
        )
    assert seconds < FINISHED
