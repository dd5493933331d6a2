"""The house stays layered: every import inside ``src/rlzoo`` (top-level, in functions, under ``TYPE_CHECKING``, and
by string: ``importlib.import_module("rlzoo.x")``, ``"rlzoo.x:Name"``) points to its own layer or one below
(:data:`rlzoo.layers.LAYERS`), and no import goes in a circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rlzoo.layers import LAYERS, layer_of

SOURCE = Path(__file__).resolve().parents[1] / "src"
MODULE_AND_NAME = re.compile(r"^(rlzoo(?:\.\w+)*):\w+$")  # "rlzoo.x:Name", as entry points and registries name


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> set[str]:
    """The rlzoo modules ``path`` imports (``from rlzoo.x import y`` counts ``rlzoo.x.y`` when that is a module)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    found: set[str] = _imports_by_string(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "rlzoo"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            if base.split(".")[0] != "rlzoo":
                continue
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")}
    return found


def _imports_by_string(tree: ast.AST) -> set[str]:
    """The rlzoo modules named as strings to import: ``importlib.import_module("rlzoo.x")`` (or ``import_module``,
    ``__import__``) with a literal name, and ``"rlzoo.x:Name"`` strings."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _calls_import(node.func) and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("rlzoo"):
                found.add(name.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_AND_NAME.match(node.value)
            if match:
                found.add(match.group(1))
    return found


def _calls_import(func: ast.expr) -> bool:
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return called in ("import_module", "__import__")


def _is_module(name: str) -> bool:
    path = SOURCE.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in sorted((SOURCE / "rlzoo").rglob("*.py"))}
    return {name: {m for m in _imports(path, name) if m in modules and m != name} for name, path in modules.items()}


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in _graph():
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_points_up_a_layer() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module) and not module.startswith(target + ".")  # a package's own __init__
    ]
    assert upward == []


def test_no_import_circle() -> None:
    graph = _graph()
    for module in graph:  # a package's __init__ is imported on the way to its modules: not an edge back
        graph[module] = {t for t in graph[module] if not module.startswith(t + ".")}
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_imports_by_string_are_imports(tmp_path: Path) -> None:
    """The walk reads imports by string: a registry of the training layer naming a kind of an upper layer's package
    by ``importlib`` or as ``module:Name`` is an import that points up."""
    source = tmp_path / "registry.py"
    source.write_text(
        "import importlib\n"
        "def make():\n"
        "    return importlib.import_module('rlzoo.multiagent.kind').MultiAgent()\n"
        "ENTRY = ('single-agent', 'rlzoo.single_agent.kind:SingleAgent')\n"
        "NOT_AN_IMPORT = 'rlzoo.multiagent is imported by rlzoo.kinds: see there'\n"
    )
    found = _imports(source, "rlzoo.training.kind")
    assert found == {"rlzoo.multiagent.kind", "rlzoo.single_agent.kind"}
    assert all(layer_of(target) > layer_of("rlzoo.training.kind") for target in found)


def test_a_module_no_layer_names_has_no_layer() -> None:
    """The check above can fail: a new top-level module is in no layer until the table names it (the package's own
    name covers only its ``__init__``)."""
    with pytest.raises(KeyError, match=r"rlzoo\.newcomer is in no layer"):
        layer_of("rlzoo.newcomer")
    assert LAYERS[layer_of("rlzoo")][0] == "envs"


def test_architecture_md_names_every_package_and_top_level_module() -> None:
    """``docs/architecture.md``'s table names every package and top-level module of ``src/rlzoo`` (as `name`,
    `name/` or `name.py`), and every module of the layer table exists."""
    text = (SOURCE.parents[0] / "docs" / "architecture.md").read_text()
    top = sorted(p.stem for p in (SOURCE / "rlzoo").iterdir() if p.suffix == ".py" and p.stem != "__init__")
    top += sorted(p.name for p in (SOURCE / "rlzoo").iterdir() if (p / "__init__.py").is_file())
    unnamed = [name for name in top if not re.search(rf"`{name}(/|\.py)?`", text)]
    assert unnamed == []
    named = [prefix for _, prefixes in LAYERS for prefix in prefixes]
    assert [m for m in named if not _is_module(m)] == []


@pytest.mark.parametrize(("module", "layer"), [("rlzoo.srl.train", "entrypoints"), ("rlzoo.srl.losses", "srl")])
def test_longest_prefix_decides(module: str, layer: str) -> None:
    assert LAYERS[layer_of(module)][0] == layer


def test_envs_import_neither_torch_nor_sb3() -> None:
    """``envs/`` is numpy + gymnasium; only the batched MobileRobot vec env (an SB3 ``VecEnv``, imported by the run
    builder, never by ``import rlzoo.envs``) takes SB3."""
    sb3_form = SOURCE / "rlzoo" / "envs" / "mobile_robot_batched.py"
    found = [
        f"{path.name}: {line.strip()}"
        for path in sorted((SOURCE / "rlzoo" / "envs").glob("*.py"))
        if path != sb3_form
        for line in path.read_text().splitlines()
        if re.match(r"\s*(import|from) (torch|stable_baselines3)\b", line)
    ]
    assert found == []
