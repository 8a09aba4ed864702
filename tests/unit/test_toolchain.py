"""The toolchain runner: caching, resuming, and failures that name the tool and the step."""

from __future__ import annotations

import io
import os
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest

from infra import toolchain
from infra.toolchain import Tool, ToolchainError

PINS = {"hello": "1.2.3"}


@pytest.fixture
def recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recipes folder with the real lib.sh and a cache of its own."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    shutil.copy(toolchain.RECIPES / "lib.sh", folder / "lib.sh")
    monkeypatch.setenv("ESI_TOOLS_DIR", str(tmp_path / "cache"))
    return folder


def write_recipe(folder: Path, body: str) -> Tool:
    (folder / "hello.sh").write_text(body)
    return Tool("hello", ("hello",), ("hello",), recipes=folder)


GOOD = """cd "$WORK"
step "compile hello"
echo built >>"$WORK/builds"
printf '#!/bin/sh\\necho %s\\n' "$VERSION" >"$OUT/bin/hello"
chmod +x "$OUT/bin/hello"
"""


def test_builds_once_then_costs_nothing(recipes: Path) -> None:
    tool = write_recipe(recipes, GOOD)
    out = io.StringIO()

    assert toolchain.ensure(out=out, tools=[tool], pins=PINS) == [tool]
    assert toolchain.ensure(out=out, tools=[tool], pins=PINS) == []

    installed = toolchain.install_dir(tool, PINS) / "bin" / "hello"
    assert os.access(installed, os.X_OK)
    assert installed.parent.parent.name.startswith("hello-1.2.3-")
    builds = toolchain.cache_root() / "work" / "hello-1.2.3" / "builds"
    assert builds.read_text().count("built") == 1
    assert "hello 1.2.3 ready" in out.getvalue()


def test_a_changed_recipe_or_version_is_a_different_install(recipes: Path) -> None:
    tool = write_recipe(recipes, GOOD)
    first = toolchain.install_dir(tool, PINS)

    assert toolchain.install_dir(tool, {"hello": "1.2.4"}) != first
    write_recipe(recipes, GOOD + "# a different build\n")
    assert toolchain.install_dir(tool, PINS) != first


def test_a_changed_file_beside_the_recipe_is_a_different_install(recipes: Path) -> None:
    tool = write_recipe(recipes, GOOD)
    bare = toolchain.install_dir(tool, PINS)
    patch = recipes / "hello" / "src" / "fix.patch"
    patch.parent.mkdir(parents=True)
    patch.write_text("one\n")
    patched = toolchain.install_dir(tool, PINS)

    patch.write_text("two\n")

    assert len({bare, patched, toolchain.install_dir(tool, PINS)}) == 3


def test_failure_names_tool_and_step_and_leaves_nothing_installed(recipes: Path) -> None:
    tool = write_recipe(recipes, 'cd "$WORK"\nstep "compile hello"\necho "undefined: foo" >&2\nfalse\n')

    with pytest.raises(ToolchainError, match=r"building hello 1\.2\.3 failed at step 'compile hello'") as err:
        toolchain.ensure(out=io.StringIO(), tools=[tool], pins=PINS)

    assert "undefined: foo" in str(err.value)
    assert toolchain.missing(PINS, [tool]) == [tool]


def test_a_recipe_that_forgets_a_binary_fails(recipes: Path) -> None:
    tool = write_recipe(recipes, 'step "do nothing"\n')

    with pytest.raises(ToolchainError, match=r"did not produce \['hello'\]"):
        toolchain.ensure(out=io.StringIO(), tools=[tool], pins=PINS)


def test_an_interrupted_build_resumes_from_its_work_directory(recipes: Path) -> None:
    # The first run dies after producing a partial result in WORK; the second run reuses it.
    body = (
        'cd "$WORK"\nstep "fetch"\n'
        "if [ ! -f fetched ]; then touch fetched; exit 3; fi\n"
        'step "link"\nprintf "#!/bin/sh\\n" >"$OUT/bin/hello"; chmod +x "$OUT/bin/hello"\n'
    )
    tool = write_recipe(recipes, body)

    with pytest.raises(ToolchainError, match="step 'fetch'"):
        toolchain.ensure(out=io.StringIO(), tools=[tool], pins=PINS)
    assert toolchain.ensure(out=io.StringIO(), tools=[tool], pins=PINS) == [tool]


def test_unknown_tool_is_refused(recipes: Path) -> None:
    tool = write_recipe(recipes, GOOD)
    with pytest.raises(ToolchainError, match="unknown tool"):
        toolchain.ensure(["nope"], out=io.StringIO(), tools=[tool], pins=PINS)


def test_binary_of_a_missing_tool_says_run_make_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ESI_TOOLS_DIR", str(tmp_path))
    with pytest.raises(ToolchainError, match="make tools"):
        toolchain.binary("kube-apiserver")


def test_pins_come_from_pyproject() -> None:
    pins = toolchain.load_pins()
    # The CLI and the provider must match the SDKs pip installs; both are read from the dependency pins.
    assert pins["pulumi"] == version("pulumi")
    assert pins["pulumi-kubernetes"] == version("pulumi-kubernetes")
    assert pins["kubernetes"].startswith("1.34.")
    for tool in toolchain.TOOLS:
        assert tool.recipe.is_file(), tool


def test_prune_removes_only_builds_nothing_asks_for(recipes: Path) -> None:
    tool = write_recipe(recipes, GOOD)
    toolchain.ensure(out=io.StringIO(), tools=[tool], pins=PINS)
    current = toolchain.install_dir(tool, PINS)
    old = toolchain.cache_root() / "hello-1.2.2-0123456789"
    unrelated = toolchain.cache_root() / "other-1.0-0123456789"
    for directory in (old, unrelated):
        (directory / "bin").mkdir(parents=True)

    assert toolchain.prune(PINS, [tool]) == [old]
    assert current.is_dir()
    assert unrelated.is_dir()
    assert (toolchain.cache_root() / "work").is_dir(), "scratch directories are kept for resuming"
