"""Test modules share helpers through shared modules named for what they hold (``tests.builders``,
``tests.integration.kube``, ...), never by importing each other: a test module imported by another is collected
once but runs its import-time code for both, and its helpers are hidden among its tests."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


TEST_MODULES = {module_name(path): path for path in sorted(TESTS.rglob("test_*.py"))}


def imported(tree: ast.Module, importer: str) -> list[tuple[int, str]]:
    """(line, module) of everything ``importer`` imports, wherever the import stands; for ``from a import b``
    both ``a`` and ``a.b`` (b may be a module)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package upwards
                package = importer.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            found += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}") for alias in node.names)]
    return found


def test_the_tests_are_found() -> None:
    assert "tests.unit.test_test_modules" in TEST_MODULES
    assert any(name.startswith("tests.integration.test_") for name in TEST_MODULES)


def test_no_test_module_imports_another() -> None:
    offending = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for importer, path in TEST_MODULES.items()
        for line, module in imported(ast.parse(path.read_text(), str(path)), importer)
        if module in TEST_MODULES and module != importer
    ]
    assert not offending, "move what they share into a shared module:\n" + "\n".join(offending)


def test_an_import_of_a_test_module_is_found_in_each_spelling() -> None:
    source = "from tests.unit.test_client import x\nfrom tests.unit import test_client\nfrom . import test_client\n"
    found = imported(ast.parse(source), "tests.unit.test_cli")
    assert [module for _, module in found if module in TEST_MODULES] == ["tests.unit.test_client"] * 3
