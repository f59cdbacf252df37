"""The ``embedder`` config key: what it accepts (:func:`spec_problems`) and the embedder it
builds (:func:`make_embedder`)."""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.embedders.cache import CachedEmbedder
from ovos_memory_plugins.embedders.hashing import HashingEmbedder
from ovos_memory_plugins.embedders.local import local_embedder
from ovos_memory_plugins.embedders.openai_compatible import OpenAIEmbedder
from ovos_memory_plugins.embedders.opm import OPMEmbedder
from ovos_memory_plugins.embedders.protocol import Embedder
from ovos_memory_plugins.errors import ConfigError

#: The names the ``embedder`` key accepts as a plain string.
EMBEDDER_NAMES = ("hash", "local", "local-minilm", "local-multilingual", "local-use", "local-e5")
#: The local models by name (``{"type": "local", "model": ...}``).
LOCAL_MODEL_NAMES = ("minilm", "use-multilingual", "e5-small")
#: The plain names of local models, and the model each one means.
_LOCAL_ALIASES: dict[str, str | None] = {
    "local": None,
    "local-minilm": "minilm",
    "local-multilingual": "use-multilingual",
    "local-use": "use-multilingual",
    "local-e5": "e5-small",
}


# -- factory -------------------------------------------------------------------------------


#: The keys each ``embedder`` object type accepts (besides ``type``).
EMBEDDER_KEYS: dict[str, set[str]] = {
    "hash": {"dimension"},
    "openai": {
        "model",
        "base_url",
        "api_key",
        "dimensions",
        "batch_size",
        "timeout",
        "query_timeout",
        "backoff_s",
        "backoff_max_s",
        "query_prefix",
        "document_prefix",
    },
    "opm": {"module", "config", "timeout", "query_timeout", "backoff_s", "backoff_max_s"},
    "local": {"model", "threads"},
}


def spec_problems(spec: Any) -> list[str]:
    """What is wrong with an ``embedder`` value, without building anything (empty when fine)."""
    if isinstance(spec, str):
        if spec in EMBEDDER_NAMES:
            return []
        return [f"key 'embedder': {spec!r} is not accepted; expected one of {', '.join(EMBEDDER_NAMES)} or an object"]
    if not isinstance(spec, dict):
        return [f"key 'embedder': {spec!r} is not accepted; expected a name or an object"]
    kind = spec.get("type")
    if kind not in EMBEDDER_KEYS:
        return [f"key 'embedder.type': {kind!r} is not accepted; expected one of {', '.join(sorted(EMBEDDER_KEYS))}"]
    accepted = ", ".join(sorted(EMBEDDER_KEYS[kind]))
    problems = [
        f"unknown key 'embedder.{u}' for type {kind!r}; accepted keys: {accepted}"
        for u in sorted(set(spec) - EMBEDDER_KEYS[kind] - {"type"}, key=str)
    ]
    if kind == "local" and spec.get("model") not in (None, *LOCAL_MODEL_NAMES):
        names = ", ".join(LOCAL_MODEL_NAMES)
        problems.append(f"key 'embedder.model': {spec.get('model')!r} is not accepted; expected one of {names}")
    if kind == "hash" and "dimension" in spec:
        dim = spec["dimension"]
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 8:
            problems.append(f"key 'embedder.dimension': {dim!r} is not accepted; expected an integer >= 8")
    if kind in ("openai", "opm"):
        name_key = "model" if kind == "openai" else "module"
        value = spec.get(name_key)
        if (kind == "opm" or name_key in spec) and (not isinstance(value, str) or not value):
            problems.append(f"key 'embedder.{name_key}': {value!r} is not accepted; expected a non-empty string")
    return problems


def make_embedder(spec: str | dict[str, Any] | None) -> Embedder:
    """Build an embedder from the ``embedder`` config key.

    Accepted: ``"hash"``, ``"local"`` (the default local model), ``"local-minilm"`` (English),
    ``"local-multilingual"`` (= ``"local-use"``, 16 languages), ``"local-e5"``, or an object
    with ``type`` one of ``hash`` (``dimension``), ``openai``
    (see :class:`OpenAIEmbedder`), ``opm`` (``module``, ``config``), ``local`` (``model``,
    ``threads``). Raises :class:`ConfigError` for a bad spec and :class:`BackendError` when
    the model or plugin cannot be loaded.

    The model comes wrapped in a :class:`CachedEmbedder` with the process-wide query LRU (so
    an utterance is embedded once per turn however many arms or members ask) and no document
    cache; :meth:`CachedEmbedder.with_cache` adds a memory's content-hash table. The id is the
    model's own.
    """
    return _cached(_make(spec))


def _cached(embedder: Embedder) -> Embedder:
    return embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)


def _make(spec: str | dict[str, Any] | None) -> Embedder:
    if spec is None:
        spec = "local"
    if isinstance(spec, str):
        if spec == "hash":
            return HashingEmbedder()
        if spec in _LOCAL_ALIASES:
            return local_embedder(_LOCAL_ALIASES[spec], {})
        raise ConfigError(
            [f"key 'embedder': {spec!r} is not accepted; expected one of {', '.join(EMBEDDER_NAMES)} or an object"]
        )
    if not isinstance(spec, dict):
        raise ConfigError([f"key 'embedder': {spec!r} is not accepted; expected a name or an object"])
    problems = spec_problems(spec)
    if problems:
        raise ConfigError(problems)
    kind = spec["type"]
    rest = {k: v for k, v in spec.items() if k != "type"}
    try:
        if kind == "hash":
            return HashingEmbedder(**rest)
        if kind == "openai":
            return OpenAIEmbedder(**rest)
        if kind == "opm":
            return OPMEmbedder(**rest)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError([f"key 'embedder': {spec!r} is not accepted: {exc}"]) from exc
    return local_embedder(rest.get("model"), rest)
