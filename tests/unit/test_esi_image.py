"""esi's image is tagged by what goes into it: every source file counts, byte caches do not."""

from __future__ import annotations

from pathlib import Path

from infra.images.esi import SOURCE_PACKAGES, _sources_digest


def tree(root: Path) -> Path:
    (root / "pyproject.toml").write_text('[project]\nname = "esi"\nversion = "0.1.0"\n')
    (root / "README.md").write_text("esi\n")
    for package in ("esi", *SOURCE_PACKAGES):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(f"# {package}\n")
    return root


def test_the_digest_follows_every_source_file_and_ignores_byte_caches(tmp_path: Path) -> None:
    repo = tree(tmp_path)
    before = _sources_digest(repo)

    (repo / "api" / "__pycache__").mkdir()
    (repo / "api" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert _sources_digest(repo) == before, "byte caches are not sources"

    (repo / "operators" / "__init__.py").write_text("# changed\n")
    changed = _sources_digest(repo)
    assert changed != before

    (repo / "esi" / "static").mkdir()
    (repo / "esi" / "static" / "ui.js").write_text("ui\n")
    with_data = _sources_digest(repo)
    assert with_data != changed, "package data counts too"

    (repo / "examples").mkdir()
    (repo / "examples" / "x.py").write_text("not in the image\n")
    assert _sources_digest(repo) == with_data, "what the image does not hold does not count"
