"""The local embedder's tokenizer: BERT-uncased WordPiece over the vendored ``data/vocab.txt``.

Pure Python (no ``tokenizers`` package), reproducing ``BertNormalizer(lowercase)``,
``BertPreTokenizer`` and greedy longest-match ``##`` WordPiece with ``[UNK]`` for long words.
"""
from __future__ import annotations

import functools
import hashlib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

VOCAB_PATH = Path(__file__).resolve().parent / "data" / "vocab.txt"
# BERT-Base Uncased vocabulary (Apache-2.0) as shipped with all-MiniLM-L6-v2, byte-identical.
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
MAX_TOKENS = 256  # sentence-transformers max_seq_length for all-MiniLM-L6-v2, [CLS] and [SEP] included
MAX_WORD_CHARS = 100


@dataclass(frozen=True)
class Vocab:
    ids: dict[str, int]
    cls_id: int
    sep_id: int
    unk_id: int
    pad_id: int


@functools.lru_cache(maxsize=1)
def load_vocab(path: str = str(VOCAB_PATH)) -> Vocab:
    """The vocabulary, checked against its pinned sha256 (a changed file is refused)."""
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if path == str(VOCAB_PATH) and digest != VOCAB_SHA256:
        raise ValueError(f"{path}: sha256 {digest} does not match the pinned vocabulary")
    ids = {tok: i for i, tok in enumerate(data.decode("utf-8").split("\n")[:-1])}
    return Vocab(ids, ids["[CLS]"], ids["[SEP]"], ids["[UNK]"], ids["[PAD]"])


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def normalize(text: str) -> str:
    """Clean, space out CJK characters, lower-case and strip accents (BertNormalizer)."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    lowered = "".join(out).lower()
    return "".join(c for c in unicodedata.normalize("NFD", lowered) if unicodedata.category(c) != "Mn")


def pre_tokenize(text: str) -> list[str]:
    """Whitespace split, then every punctuation character as its own word."""
    words: list[str] = []
    for chunk in text.split():
        buf = ""
        for ch in chunk:
            if _is_punctuation(ch):
                if buf:
                    words.append(buf)
                    buf = ""
                words.append(ch)
            else:
                buf += ch
        if buf:
            words.append(buf)
    return words


@functools.lru_cache(maxsize=50000)
def _wordpiece(word: str) -> tuple[int, ...]:
    vocab = load_vocab()
    if len(word) > MAX_WORD_CHARS:
        return (vocab.unk_id,)
    pieces: list[int] = []
    start = 0
    while start < len(word):
        end = len(word)
        found = None
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            found = vocab.ids.get(piece)
            if found is not None:
                break
            end -= 1
        if found is None:
            return (vocab.unk_id,)
        pieces.append(found)
        start = end
    return tuple(pieces)


@functools.lru_cache(maxsize=4096)
def _line(line: str) -> tuple[int, ...]:
    return tuple(i for word in pre_tokenize(normalize(line)) for i in _wordpiece(word))


def encode(text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    """Token ids ``[CLS] ... [SEP]``, truncated to ``max_tokens``.

    A newline only separates words, so each line is tokenized once and remembered: the context
    turns embedded after each message are not tokenized again for every message that carries them.
    """
    vocab = load_vocab()
    ids: list[int] = []
    budget = max_tokens - 2
    for line in text.split("\n"):
        ids.extend(_line(line))
        if len(ids) >= budget:
            del ids[budget:]
            break
    return [vocab.cls_id, *ids, vocab.sep_id]
