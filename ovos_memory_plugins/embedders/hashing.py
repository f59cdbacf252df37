"""``"hash"``: deterministic feature hashing, no model, no I/O (tests, third-party authors)."""

from __future__ import annotations

import math
import re
import unicodedata
import zlib

import numpy as np

from ovos_memory_plugins.embedders.protocol import Matrix, normalize_rows
from ovos_memory_plugins.errors import ConfigError

# -- hashing -------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _own_features(text: str) -> list[str]:
    """Words, and character trigrams of each word padded with ``#`` (bigrams for short ones)."""
    feats: list[str] = []
    for word in _WORD.findall(_fold(text)):
        feats.append("w:" + word)
        padded = f"#{word}#"
        n = 3 if len(padded) > 3 else 2
        feats.extend("c:" + padded[i : i + n] for i in range(len(padded) - n + 1))
    return feats


class HashingEmbedder:
    """Deterministic feature hashing: the same text gives the same vector on every machine.

    Features are the index terms of :func:`ovos_memory_plugins.text.tokenize` (when the
    package has it) plus character trigrams of each word; each feature adds a signed,
    sub-linearly weighted count to one of ``dimension`` buckets (CRC-32 of its UTF-8 bytes).
    No model and no I/O: for tests, examples and third-party authors. It matches shared words
    and word pieces, not meaning.

    Args:
        dimension: vector length (>= 8).
    """

    def __init__(self, dimension: int = 512) -> None:
        if int(dimension) < 8:
            raise ConfigError([f"key 'embedder.dimension': {dimension!r} is not accepted; expected an integer >= 8"])
        self.dimension = int(dimension)
        from ovos_memory_plugins import text as text_module

        self._tokenize = getattr(text_module, "tokenize", None)
        flavour = "tok" if self._tokenize is not None else "own"
        self.id = f"hash-v1-{flavour}:{self.dimension}"

    def features(self, text: str) -> list[str]:
        """The hashed features of ``text``."""
        feats = _own_features(text)
        if self._tokenize is not None:
            feats.extend("t:" + term for term in self._tokenize(text))
        return feats

    def embed(self, texts: list[str]) -> Matrix:
        """One unit-length vector per text (all zeros for a text without features)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for feat in self.features(text):
                counts[feat] = counts.get(feat, 0) + 1
            for feat, count in counts.items():
                h = zlib.crc32(feat.encode("utf-8", "surrogatepass"))
                sign = 1.0 if h & 0x80000000 else -1.0
                out[row, h % self.dimension] += sign * (1.0 + math.log(count))
        return normalize_rows(out)
