"""No module reads another module's private attributes: front-ends (the command, the editor,
export) and plugins go through public methods and the protocols in ``protocols.py``.

The package's source is parsed (not imported), and every access to a private name
(``x._name``, ``getattr(x, "_name")``, ``hasattr(x, "_name")``) whose receiver is not the
object itself (``self``, ``cls``, ``super()``, ``type(self)``) is checked:

* against :data:`FORBIDDEN`, each with the module that owns it and what to use instead;
* generically: a private name that a class of another module defines (a method, or an
  attribute it assigns on ``self``) and the accessing module does not define itself.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ovos_memory_plugins"


@dataclass(frozen=True)
class Rule:
    owner: str  # the module (path under the package) the name belongs to
    reason: str  # why outsiders must not touch it, and what to use instead


#: Private names the review found read from outside, with their owners and the public way.
FORBIDDEN: dict[str, Rule] = {
    "_notes_store": Rule("notes/memory.py", "the notes memory's store: use the NotesKeeper protocol / notes_body()"),
    "_mutex": Rule("notes/memory.py", "the notes memory's lock: its public methods take it themselves"),
    "_update_history": Rule("memory/conversation.py", "the recorder without the never-raise guard: update_history()"),
    "_history": Rule("base.py", "the base's history store: use sessions(), messages(), get_history()"),
    "_can": Rule("base.py", "sniffing a class's hooks: capabilities are declared (protocols.py, class attributes)"),
    "_store_document": Rule("base.py", "a storage hook the base calls: use store() / put_document()"),
    "_query_backend": Rule("base.py", "a storage hook the base calls: use search()"),
    "_query_session": Rule("base.py", "a storage hook the base calls: use search(session_id=...)"),
    "_delete_documents": Rule("base.py", "a storage hook the base calls: use delete()"),
    "_delete_all": Rule("base.py", "a storage hook the base calls: use forget_all()"),
    "_session_document_ids": Rule("memory/documents.py", "a storage hook the base calls: use forget_session()"),
    "_build": Rule("memory/recall.py", "the base's turn: use build_conversation_context()"),
    "_members": Rule("composite/memory.py", "the composite's member records: use its public members / protocols"),
    "_primary": Rule("composite/memory.py", "the composite's history member: use sessions(), messages()"),
    "_turn": Rule("composite/memory.py", "the composite's per-turn state"),
    "_lock": Rule("base.py", "a memory's lock: its public methods take it themselves"),
}

_SELF = ("self", "cls")
_REFLECT = ("getattr", "hasattr", "setattr", "delattr")


def _is_self(node: ast.expr) -> bool:
    """``self``, ``cls``, ``super()``, ``type(self)``, or a class named in the same module."""
    if isinstance(node, ast.Name):
        return node.id in _SELF
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "super":
            return True
        if node.func.id == "type" and len(node.args) == 1:
            return _is_self(node.args[0])
    return False


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _definitions(tree: ast.Module) -> set[str]:
    """Private names this module's classes define: methods and attributes set on ``self``,
    and private top-level names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(node.name):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in _SELF
            and _private(node.attr)
        ):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _private(node.target.id):
            names.add(node.target.id)
    return names


def _own_class_names(tree: ast.Module) -> set[str]:
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def _accesses(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, private name, source text) of every private access on something else."""
    classes = _own_class_names(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            receiver = node.value
            if _is_self(receiver) or (isinstance(receiver, ast.Name) and receiver.id in classes):
                continue
            out.append((node.lineno, node.attr, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _REFLECT
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not _is_self(node.args[0])
        ):
            out.append((node.lineno, node.args[1].value, ast.unparse(node)))
    return out


def _violations() -> list[str]:
    trees = {_module(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}
    defined_by = {module: _definitions(tree) for module, tree in trees.items()}
    problems = []
    for module, tree in trees.items():
        for line, name, text in _accesses(tree):
            rule = FORBIDDEN.get(name)
            if rule is not None:
                if module != rule.owner:
                    problems.append(f"{module}:{line}: {text}: {rule.reason}")
                continue
            owners = sorted(m for m, names in defined_by.items() if name in names and m != module)
            if owners and name not in defined_by[module]:
                problems.append(f"{module}:{line}: {text}: a private attribute of {', '.join(owners)}")
    return problems


def test_no_module_reads_another_modules_private_attributes() -> None:
    problems = _violations()
    assert problems == [], "\n".join(problems)


# -- the checker itself -----------------------------------------------------------------------------


def test_the_checker_sees_each_kind_of_access() -> None:
    tree = ast.parse(
        "class Mine:\n"
        "    def f(self, memory):\n"
        "        self._own = 1\n"
        "        super()._hook()\n"
        "        type(self)._query_session\n"
        "        Mine._own\n"
        "        memory._update_history([], 's')\n"
        "        getattr(memory, '_notes_store', None)\n"
        "        hasattr(self, '_fine')\n"
    )
    found = sorted((line, name) for line, name, _ in _accesses(tree))
    assert found == [(7, "_update_history"), (8, "_notes_store")]
    assert _definitions(tree) == {"_own"}


def test_every_forbidden_name_has_a_real_owner() -> None:
    for name, rule in FORBIDDEN.items():
        source = (PACKAGE / rule.owner).read_text(encoding="utf-8")
        assert name in source, f"{name} is not in {rule.owner}: update FORBIDDEN"
