"""The shape the code keeps for its next reader (docs/architecture.md, "Code shape"):
modules of at most 400 lines, functions of at most 50, and ``Any`` only where a value
really is untyped (the codec's field values), so the type checker sees everything else.
The generated message classes (protocol/messages/) are not counted."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kshim"
GENERATED = PACKAGE / "protocol" / "messages"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
MAX_ANY = 20
ANY_ALLOWED_IN = {PACKAGE / "protocol" / "codec.py"}


def modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if GENERATED not in path.parents:
            yield path


def name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_module_is_longer_than_400_lines() -> None:
    long = {name(path): lines for path in modules()
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}  # fmt: skip
    assert long == {}


def test_no_function_is_longer_than_50_lines() -> None:
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name(path)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def uses_of_any(path: Path) -> list[int]:
    """Lines naming ``typing.Any`` outside imports."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text())) if _names_any(node)]


def _names_any(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Any"
    return isinstance(node, ast.Attribute) and node.attr == "Any"


def test_any_stays_rare() -> None:
    uses = {name(path): lines for path in modules() if path not in ANY_ALLOWED_IN
            and (lines := uses_of_any(path))}  # fmt: skip
    assert sum(len(lines) for lines in uses.values()) <= MAX_ANY, uses
