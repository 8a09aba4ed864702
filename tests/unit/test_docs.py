"""The docs site builds with --strict (no broken link or anchor; reference pages generated from the code), the
README's links lead somewhere, and its first scheduler type-checks against esi's client."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FIRST_SCHEDULER = re.compile(
    r"<!-- --8<-- \[start:first-scheduler\] -->\n```python\n(?P<code>.*?)```\n<!-- --8<-- \[end:first-scheduler\] -->",
    re.DOTALL,
)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it, into a folder of the test's own."""
    directory = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml", "--site-dir", directory],
        check=False,
        cwd=REPO,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stdout}{built.stderr}"
    return directory


def test_the_site_builds_strictly_with_the_generated_reference(site: Path) -> None:
    for page, needle in [
        ("reference/rest-api", "/external/schedulings"),
        ("reference/crds", "spec.resourcesPerSlot"),
        ("reference/cli", "Usage: esi submit"),
        ("reference/config", "esi:realNodes"),
        ("reference/config", "esi:schedulerImage"),
        ("tutorials/first-scheduler", "submit_queue"),  # the README's snippet, included
    ]:
        assert needle in (site / page / "index.html").read_text(), f"{page} lacks {needle!r}"


def test_every_link_of_the_readme_leads_to_a_file_and_anchor(site: Path) -> None:
    broken = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        if not (REPO / path).exists():
            broken.append(target)
        elif anchor:
            page = Path(path).relative_to("docs").with_suffix("")
            html = site / page / "index.html" if page.name != "index" else site / page.parent / "index.html"
            if f'id="{anchor}"' not in html.read_text():
                broken.append(target)
    assert not broken, f"README.md links to what does not exist: {broken}"


def test_the_readmes_first_scheduler_type_checks_against_the_client(tmp_path: Path) -> None:
    found = FIRST_SCHEDULER.search(README.read_text())
    assert found, "README.md's first scheduler (between the first-scheduler snippet markers) is missing"
    script = tmp_path / "first_scheduler.py"
    script.write_text(found["code"])
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(REPO / ".mypy_cache" / "readme"),
            str(script),
        ],
        check=False,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, f"README.md's first scheduler does not fit esi's client:\n{checked.stdout}"
