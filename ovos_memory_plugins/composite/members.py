"""The members of a composite: the member record (:class:`Member`), loading a member plugin by
its entry-point name (:func:`load_member_class`), whether a member can be a part of one storage
(:func:`is_part`), the config each member is built with, where each keeps its data, the one
storage of parts and the adoption of the per-member memories of earlier releases, the primary
(whose history the prompt uses) and the recorder, and the strict checks of the members' config.
Part of :class:`~ovos_memory_plugins.composite.memory.CompositeMemory`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite.options import (
    PARTS_FILE,
    PLACEMENT_KEYS,
    CompositeOptions,
    MemberSpec,
    parse_members,
)
from ovos_memory_plugins.composite.state import CompositeState
from ovos_memory_plugins.concurrency import DaemonPool
from ovos_memory_plugins.config import MemoryConfig, ParsedConfig, parse_config, resolve_root, validate_config
from ovos_memory_plugins.errors import BackendError, ConfigError
from ovos_memory_plugins.llm import check_llm_config, close_quietly
from ovos_memory_plugins.protocols import Capabilities, ForgetNotifier, capabilities
from ovos_memory_plugins.storage.migrate import discard_storage, merge_storage
from ovos_memory_plugins.storage.registry import open_storage, redact_url
from ovos_memory_plugins.storage.seam import Storage

LOG = logging.getLogger("ovos_memory_plugins.composite")  # the name it had before the split

__all__ = ["Member", "MembersMixin", "is_part", "load_member_class", "member_namespace"]


def load_member_class(module: str) -> type[Any] | None:
    """The class of the member plugin ``module``; None when none of that name is installed."""
    from ovos_memory_plugins import loader

    try:
        return loader.plugin_class(module)
    except loader.PluginNotFound:
        return None


def is_part(cls: type[Any] | None, spec: MemberSpec) -> bool:
    """Whether the member ``spec`` of class ``cls`` can be a part of a composite's one storage: a
    memory of this package that declares ``shares_storage`` (keyword, vector, sticky notes,
    curated notes), accepts its block as a part (:meth:`~ovos_memory_plugins.base.BaseRetrievalMemory.can_be_part`:
    not notes with ``"archive": null``) and whose config places its data nowhere of its own
    (``root``, ``db_path``, ``database``)."""
    return (
        isinstance(cls, type)
        and issubclass(cls, BaseRetrievalMemory)
        and cls.can_be_part(dict(spec.config))
        and not (PLACEMENT_KEYS & set(spec.config))
    )


class Member:
    """A loaded member: its spec, instance, capabilities and its ordered writer."""

    def __init__(self, spec: MemberSpec, instance: Any, caps: Capabilities, semantic: bool, recall: bool) -> None:
        self.spec = spec
        self.name = spec.name
        self.instance = instance
        self.caps = caps
        self.recalls = caps.retriever and recall  # whether its search hits are fused
        self.semantic = semantic
        self.writer = DaemonPool(f"composite-{spec.name}-write", 1)
        self.lock = threading.Lock()
        self.late = 0  # calls still running past their turn's deadline
        self.failing = False  # the last call raised or was late (repeats are logged at DEBUG)
        # where a member of this package keeps its data: its folder, or (database, namespace)
        self.places: frozenset[str] = frozenset()
        self.pending_writes = 0
        self.write_late = False  # a write outlived write_timeout_ms and has not finished yet

    @property
    def scope(self) -> str | None:
        settings = getattr(self.instance, "settings", None)
        scope = getattr(settings, "scope", None)
        return scope if isinstance(scope, str) else None

    @property
    def keeps_history(self) -> bool:
        if not self.caps.history:
            return False
        settings = getattr(self.instance, "settings", None)
        limit = getattr(settings, "max_history", None)
        return not (isinstance(limit, int) and limit <= 0)


class MembersMixin(CompositeState):
    """Loading the members, their config and storage (see the module docstring)."""

    def member_config(self, spec: MemberSpec, cls: type[Any] | None = None) -> dict[str, Any]:
        """The config a member is built with: its own block, plus the composite's ``scope``,
        ``namespace`` and ``max_history`` where it sets none, and ``root`` = ``<composite's
        root>/<member name>`` (the member then adds the namespace) where it sets neither ``root``
        nor ``namespace``.

        A member of this package (``cls`` a :class:`BaseRetrievalMemory`, or unknown) also gets
        the composite's ``database`` where it sets none; on a database, a member whose block
        sets no ``namespace`` is keyed by :func:`member_namespace` (``<namespace>.<member
        name>``), so members of one database never share rows, as on SQLite where each has its
        own folder."""
        return _member_config(self.settings, self.root, spec, cls)

    @classmethod
    def stored_files(cls, memory: MemoryConfig, options: Any) -> list[Path]:
        """The files any of which holds a composite with these settings: its members'
        (``stored_files`` of each member class of this package, with the config the member
        would be built with); empty when a member's files cannot be known (a plugin that is
        not built on the base, or not installed): then nothing is refused on their account."""
        if not isinstance(options, CompositeOptions):
            return []
        specs, _ = parse_members(options.members)
        root = resolve_root(memory)
        files: list[Path] = []
        try:
            parts = bool(specs) and all(is_part(cls._member_class(spec.module), spec) for spec in specs)
        except Exception:
            return []
        if parts and memory.database:
            return []  # one namespace of a database server
        if parts:
            files.append(root / PARTS_FILE)  # then the members' files of earlier releases, adopted on open
        for spec in specs:
            try:
                member_cls = cls._member_class(spec.module)
            except Exception:
                return []
            if member_cls is None or not issubclass(member_cls, BaseRetrievalMemory):
                return []
            parsed = parse_config(_member_config(memory, root, spec, member_cls), member_cls.options_class)
            own = member_cls.stored_files(parsed.memory, parsed.options)
            if not own:
                return []  # a member in RAM or on a database server: it may hold the memory
            files.extend(own)
        return files

    def _load(self, spec: MemberSpec) -> Member | None:
        label = f"member {spec.name!r} ({spec.module})"
        try:
            cls = self._member_class(spec.module)
        except Exception as exc:
            return self._skip(spec, f"{label} is skipped: loading its plugin raised {type(exc).__name__}: {exc}")
        if cls is None:
            return self._skip(
                spec, f"{label} is skipped: no memory plugin of that name is installed (entry points opm.agents.memory)"
            )
        config = self.member_config(spec, cls)
        one_storage = self.storage
        places = frozenset() if one_storage is not None else _places_of(cls, config)
        for m in self._members:
            shared = " and ".join(sorted(places & m.places, reverse=True))  # the folder first
            if shared:
                return self._skip(spec, f"{label} is skipped: it would share {shared} with member {m.name!r}")
        try:
            # the package's memories share the composite's clock; third-party ones keep their own
            given: dict[str, Any] = {"clock": self.clock} if _takes_clock(cls) else {}
            if one_storage is not None:
                given["storage"] = one_storage  # a part of this one memory
            instance = cls(config=config, **given)
        except Exception as exc:
            LOG.debug("CompositeMemory: %s failed to start", label, exc_info=True)
            return self._skip(spec, f"{label} is skipped: {cls.__name__}(config) raised {type(exc).__name__}: {exc}")
        try:
            caps = capabilities(instance)  # the label above already names the member
        except BackendError as exc:
            close_quietly(instance, "CompositeMemory: a member")
            return self._skip(spec, f"{label} is skipped: {exc}")
        semantic = _flag(spec.semantic, instance, "semantic", False)
        recall = _flag(spec.recall, instance, "composite_recall", True)
        member = Member(spec, instance, caps, semantic, recall)
        member.places = places
        if isinstance(instance, ForgetNotifier):  # it tells when it forgot a note, however asked
            instance.add_forget_listener(functools.partial(self._copies_forgotten, spec.name))
        return member

    def _skip(self, spec: MemberSpec, reason: str) -> Member | None:
        LOG.error("CompositeMemory: %s", reason)
        self.skipped[spec.name] = reason
        return None

    def _choose_primary(self, wanted: str | None) -> Member | None:
        if wanted is not None:
            for m in self._members:
                if wanted in (m.name, m.spec.module):
                    if m.keeps_history:
                        return m
                    LOG.error("CompositeMemory: primary %r keeps no history; using the first member that does", wanted)
                    break
            else:
                LOG.error(
                    "CompositeMemory: primary %r is not a loaded member (loaded: %s); using the first keeping history",
                    wanted,
                    ", ".join(self.members) or "none",
                )
        for m in self._members:
            if m.keeps_history:
                return m
        if self._members:
            LOG.warning("CompositeMemory: no member keeps history; prompts will have no recent turns")
        return None

    def _open_parts(self, specs: Sequence[MemberSpec]) -> Storage | None:
        """The one storage of a composite whose every member can be a part (:func:`is_part`):
        ``<root>/composite.db`` (:data:`PARTS_FILE`), or the composite's ``namespace`` of its
        ``database``, opened with every member's engine options. None when a member cannot be a
        part (a third-party plugin, a member placed elsewhere): the members stay whole memories.
        Never raises: a storage that cannot be opened is RAM, and says so."""
        if not specs:
            return None
        options: dict[str, Any] = {}
        single: set[type[Any]] = set()
        for spec in specs:
            try:
                cls = self._member_class(spec.module)
            except Exception:
                return None  # _load names it
            if cls is None or not is_part(cls, spec):
                return None
            if cls.single_part:  # two notes members would share one MEMORY.md: whole members
                if cls in single:
                    return None
                single.add(cls)
            parsed = parse_config(self.member_config(spec, cls), cls.options_class)
            for key, value in cls.storage_options(parsed.options).items():
                options[key] = options.get(key) or value
        s = self.settings
        where = redact_url(s.database) if s.database else str(self.root / PARTS_FILE)
        try:
            if s.database:
                storage = open_storage(s.database, namespace=s.namespace, **options)
            else:
                storage = open_storage(self.root / PARTS_FILE, **options)
        except Exception as exc:  # a constructor must not raise: any driver error is reported
            reason = f"cannot use {where} ({exc})"
            LOG.error("CompositeMemory: %s; memories are kept in RAM only and lost when the process ends", reason)
            storage = open_storage(":memory:", **options)
            storage.db.fallback_reason = reason
        storage.folder = self.root  # the parts' files beside it (the curated notes' MEMORY.md)
        return storage

    def _adopt_files(self, m: Member, old: ParsedConfig) -> None:
        """A part's files of earlier releases in its member folder besides the database (the
        curated notes' ``MEMORY.md``, ``RETIRED.md``, undo history: ``adopt_folder``), after
        the database was merged. Never raises (logged)."""
        folder = resolve_root(old.memory)
        try:
            moved = m.instance.adopt_folder(folder)
        except Exception as exc:
            LOG.error("CompositeMemory: cannot adopt member %r's files in %s (%s); left in place", m.name, folder, exc)
            return
        if moved:
            LOG.warning(
                "CompositeMemory: member %r's earlier notes in %s are now part of %s (%d item(s); the old files "
                "are renamed *.moved)",
                m.name,
                folder,
                self.root,
                moved,
            )

    def _adopt_members(self) -> None:
        """Move the memories the members kept on their own in earlier releases (each member's
        folder, ``<root>/<name>/...``, or its namespace ``<namespace>.<name>`` of the database)
        into the one storage, once and losslessly
        (:func:`~ovos_memory_plugins.storage.migrate.merge_storage`: documents merged by id,
        vectors copied, one copy of the history, sticky notes, curated notes, summaries), then
        delete them (:func:`~ovos_memory_plugins.storage.migrate.discard_storage`), so no copy
        stays where no forget reaches; then each part takes in what it kept in files beside its
        database (``adopt_folder``: the curated notes' ``MEMORY.md``, renamed ``*.moved``). One
        that cannot be read or merged is left in place, with an ERROR."""
        shared = self.storage
        if shared is None or shared.db.in_ram or shared.db.fallback_reason:
            return
        order = sorted(self._members, key=lambda m: m is not self._primary_guess())
        for m in order:
            cls = type(m.instance)
            old = parse_config(self.member_config(m.spec, cls), cls.options_class)
            self._adopt_database(shared, m, old)
            if shared.local:
                self._adopt_files(m, old)

    def _adopt_database(self, shared: Storage, m: Member, old: ParsedConfig) -> None:
        """Merge member ``m``'s database of an earlier release (its file, or its namespace of
        the database) into ``shared``, then delete it (see :meth:`_adopt_members`)."""
        cls = type(m.instance)
        if shared.local:
            where = cls.database_path(old.memory, old.options)
            if where is None or not where[0].is_file():
                return
            if where[0].resolve() == Path(shared.db.location).resolve():
                return
            location: Any = where[0]
            options: dict[str, Any] = {}
        else:
            if not self.settings.database or old.memory.namespace == shared.namespace:
                return
            location, options = self.settings.database, {"namespace": old.memory.namespace}
        label = redact_url(str(location)) if not shared.local else str(location)
        try:
            source = open_storage(location, **options)
        except Exception as exc:
            LOG.error(
                "CompositeMemory: cannot read member %r's earlier memory %s (%s); left in place", m.name, label, exc
            )
            return
        try:
            if not shared.local and not _holds_anything(source):
                source.close()
                return
            report = merge_storage(source, shared)
        except Exception as exc:
            LOG.error(
                "CompositeMemory: cannot adopt member %r's earlier memory %s (%s); left in place", m.name, label, exc
            )
            source.close()
            return
        LOG.warning(
            "CompositeMemory: member %r's earlier memory %s is now part of %s (%s); the old copy is deleted",
            m.name,
            label,
            shared.db.location,
            report.describe(),
        )
        try:
            discard_storage(source)
        except Exception as exc:
            LOG.error("CompositeMemory: could not delete member %r's earlier memory %s: %s", m.name, label, exc)

    def _primary_guess(self) -> Member | None:
        """The member whose history is adopted first (before the primary is chosen): the
        configured primary, else the first member keeping history."""
        wanted = self.options.primary
        for m in self._members:
            if wanted is not None and wanted in (m.name, m.spec.module):
                return m
        return next((m for m in self._members if m.keeps_history), None)

    def _choose_recorder(self) -> Member | None:
        """Over one storage: the member that records every exchange, once (the first that keeps
        history and archives exchanges, its documents reaching every part's index; one that
        hears its exchanges first, the curated notes, whose digest reads them; else the
        primary). None when the members are whole memories."""
        if self.storage is None:
            return None
        recording = [m for m in self._members if m.caps.history and type(m.instance).archives_exchanges]
        for m in recording:  # a part that hears its exchanges (the notes' digest) records them all
            if type(m.instance).hears_exchanges:
                return m
        for m in recording:
            return m
        return self._primary or next((m for m in self._members if m.caps.history), None)

    @classmethod
    def validate_options(cls, parsed: ParsedConfig) -> list[str]:
        """Strict checks beyond the key types: every member block, its plugin and its config,
        ``primary`` and the ``llm`` block (called by ``config.validate_config``)."""
        opts: CompositeOptions = parsed.options
        specs, problems = parse_members(opts.members)
        for spec in specs:
            where = f"members[{spec.index}] ({spec.module})"
            try:
                member_cls = cls._member_class(spec.module)
            except Exception as exc:
                problems.append(f"{where}: loading the plugin raised {type(exc).__name__}: {exc}")
                continue
            if member_cls is None:
                problems.append(f"{where}: no memory plugin named {spec.module!r} is installed")
                continue
            if getattr(member_cls, "options_class", None) is None and not issubclass(member_cls, BaseRetrievalMemory):
                continue  # a third-party plugin with no declared keys: its block is its own business
            try:
                validate_config(spec.config, member_cls)
            except ConfigError as exc:
                problems.extend(f"{where}: {p}" for p in exc.problems)
        if opts.primary is not None and not any(opts.primary in (s.name, s.module) for s in specs):
            names = ", ".join(s.name for s in specs) or "none"
            problems.append(f"key 'primary': {opts.primary!r} is not accepted; expected a member name ({names})")
        problems.extend(check_llm_config(opts.llm))
        return problems


def member_namespace(namespace: str, member: str) -> str:
    """The store key of a composite's member on a database: ``<namespace>.<member name>``
    (a valid namespace itself; a long one ends in a hash of the pair instead, so it stays
    distinct, stable and at most 128 characters)."""
    key = f"{namespace}.{member}"
    if len(key) <= 128:
        return key
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).hexdigest()
    return f"{namespace[:100]}.{digest}"


def _takes_clock(cls: type[Any]) -> bool:
    """Whether a member class is one of this package's memories (their constructors take
    ``clock=``): a base subclass whose ``__init__`` names the argument."""
    import inspect

    if not (isinstance(cls, type) and issubclass(cls, BaseRetrievalMemory)):
        return False
    try:
        return "clock" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def _member_config(s: MemoryConfig, root: Path, spec: MemberSpec, cls: type[Any] | None) -> dict[str, Any]:
    """The config a member is built with, from the composite's settings ``s`` and folder
    ``root`` (see :meth:`CompositeMemory.member_config`)."""
    cfg = dict(spec.config)
    if "root" not in cfg and "namespace" not in cfg:
        # the member adds the namespace itself (namespaces always isolate), so its folder is
        # <root>/<name>/<namespace>, and the files earlier releases kept in <root>/<name> are
        # adopted once by its storage
        base = Path(s.root).expanduser() if s.root else root
        cfg["root"] = str(base / spec.name)
    ours = cls is None or (isinstance(cls, type) and issubclass(cls, BaseRetrievalMemory))
    if ours and s.database and "database" not in cfg:
        cfg["database"] = s.database
    if cfg.get("database") and "namespace" not in cfg:
        cfg["namespace"] = member_namespace(s.namespace, spec.name)
    cfg.setdefault("scope", s.scope)
    cfg.setdefault("namespace", s.namespace)
    cfg.setdefault("max_history", s.max_history)
    return cfg


def _places_of(cls: type[Any], config: dict[str, Any]) -> frozenset[str]:
    """Where a member of this package (a BaseRetrievalMemory) keeps its data, described: the
    namespace of its database, else its folder and its SQLite file (a ``db_path`` may put the
    file elsewhere); empty for others (or what cannot be resolved). Two members sharing one
    would share rows (and one would drop the other's index)."""
    if not issubclass(cls, BaseRetrievalMemory):
        return frozenset()
    try:
        parsed = parse_config(config, cls.options_class)
        memory = parsed.memory
        if memory.database:
            return frozenset({f"the namespace {memory.namespace!r} of the database {redact_url(memory.database)}"})
        places = {f"the folder {resolve_root(memory).resolve()}"}
        where = cls.database_path(memory, parsed.options)
        if where is not None:
            places.add(f"the database file {where[0].resolve()}")
        return frozenset(places)
    except (OSError, RuntimeError, ValueError):
        return frozenset()


def _holds_anything(storage: Storage) -> bool:
    """Whether a storage holds documents, history or sticky notes (a namespace worth adopting)."""
    if storage.documents.count() or storage.history.sessions():
        return True
    if storage.holds("notes") and any(storage.notes().count()):
        return True
    return storage.holds("sticky") and storage.sticky().count() > 0


def _flag(configured: bool | None, instance: Any, attribute: str, default: bool) -> bool:
    """The member block's value, else the boolean the member declares as ``attribute``, else ``default``."""
    if configured is not None:
        return configured
    declared = getattr(instance, attribute, None)
    return declared if isinstance(declared, bool) else default
