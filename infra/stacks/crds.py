"""Write the generated CRDs to ``crds/`` (``python -m infra.stacks.crds``), or check that they are up to date.

The models in ``esi/`` are the source; the YAML is committed so that ``kubectl apply -f crds/`` and GitOps
tools work without Python. ``--check`` (run by the test suite) fails when the two have drifted apart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from esi.resources.crds import DEFINITIONS, crd
from infra.toolchain import REPO_ROOT

__all__ = ["CRD_DIR", "rendered"]

CRD_DIR = REPO_ROOT / "crds"
HEADER = "# Generated from the models in esi/ by `python -m infra.stacks.crds`; do not edit.\n"


def rendered() -> dict[Path, str]:
    """Each CRD file's path and its YAML text, as the models define it now."""
    return {
        CRD_DIR / f"{d.name}.yaml": HEADER + yaml.safe_dump(crd(d), sort_keys=False, width=120) for d in DEFINITIONS
    }


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.stacks.crds", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report files that differ from the models")
    args = parser.parse_args(argv)
    stale = [path for path, text in rendered().items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO_ROOT)} is out of date: run `make crds`", file=sys.stderr)
        return 1 if stale else 0
    CRD_DIR.mkdir(exist_ok=True)
    for path, text in rendered().items():
        path.write_text(text)
    print(f"wrote {len(DEFINITIONS)} CRDs to {CRD_DIR.relative_to(REPO_ROOT)}/ ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
