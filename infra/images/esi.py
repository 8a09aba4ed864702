"""esi's own image, made on this machine without a registry or a container daemon: ``python -m infra.images.esi``.

The layout the Dockerfile describes (the recipe for building with a daemon and pushing to a registry), from
package registries only:

* Debian's Python 3.11 and ``python-is-python3`` (the cluster stack's Deployments run ``python -m …``),
  unpacked from Debian's packages (``infra.images.root_filesystems.debian_root``);
* esi's wheel (the package ``esi``) with its ``server`` extra, installed from PyPI at pyproject.toml's exact
  pins into ``/usr/local/lib/python3.11/dist-packages``, where Debian's Python looks first;
* the server side that runs from source — ``kube``, ``operators``, ``api``, ``sim`` — in ``/app``, on
  ``PYTHONPATH``, the working directory;
* the user ``esi`` (10001), which the image runs as and the cluster stack's pods name.

The tag is esi's version and a digest of the Debian packages, pyproject.toml and every source file that goes
in: an unchanged tree reuses the cached archive (``infra.images``), a changed file builds anew. ``python -m
infra.images.esi push DESTINATION`` copies the archive to a registry with skopeo (no daemon either).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from infra import images, toolchain
from infra.images.root_filesystems import PRUNED, building, debian_root, digest, link_tree, recipe
from infra.toolchain import commands

__all__ = ["DEBIAN_PACKAGES", "ESI_UID", "SOURCE_PACKAGES", "EsiImageError", "esi_image", "python_runtime"]

DEBIAN_PACKAGES: Final = ("python3.11", "python-is-python3")
ESI_UID: Final = 10001  # the cluster stack's runAsUser
SOURCE_PACKAGES: Final = ("kube", "operators", "api", "sim")  # not in the wheel: they run from /app
SITE_PACKAGES: Final = "usr/local/lib/python3.11/dist-packages"
_PASSWD: Final = (
    f"root:x:0:0:root:/root:/usr/sbin/nologin\nesi:x:{ESI_UID}:{ESI_UID}:esi:/nonexistent:/usr/sbin/nologin\n"
)
_GROUP: Final = f"root:x:0:\nesi:x:{ESI_UID}:\n"
_ENV: Final = {
    "PYTHONPATH": "/app",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
}


class EsiImageError(RuntimeError):
    """Building esi's image failed; the message says which step."""


def python_runtime() -> Path:
    """A root filesystem with Debian's Python 3.11 (``python`` on PATH) and the user ``esi``; built once."""
    made_by = recipe(_unpack_python, debian_root)
    final = toolchain.cache_root() / "python-runtime" / f"py-{digest(*DEBIAN_PACKAGES, *PRUNED, _PASSWD, made_by)}"
    with building(final) as scratch:
        if scratch is not None:
            _unpack_python(scratch)
    return final


def _unpack_python(rootfs: Path) -> None:
    packages = debian_root(rootfs, DEBIAN_PACKAGES, error=EsiImageError, what="Debian's Python 3.11")
    (rootfs / "debian-packages.txt").write_text("".join(f"{p}\n" for p in packages))
    (rootfs / "etc" / "passwd").write_text(_PASSWD)
    (rootfs / "etc" / "group").write_text(_GROUP)
    if not (rootfs / "usr" / "bin" / "python").is_symlink():
        raise EsiImageError(f"Debian's packages unpacked, but /usr/bin/python is not in {rootfs}")


def _sources(repo: Path) -> Iterator[Path]:
    """Every file the image's esi is made of, in a fixed order: the wheel's sources and the server side's."""
    yield repo / "pyproject.toml"
    yield repo / "README.md"  # the wheel's readme
    for package in ("esi", *SOURCE_PACKAGES):
        yield from sorted(
            path
            for path in (repo / package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        )


def _sources_digest(repo: Path) -> str:
    hashed = hashlib.sha256()
    for path in _sources(repo):
        hashed.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hashed.hexdigest()


def esi_image(repo: Path = toolchain.REPO_ROOT) -> images.BuiltImage:
    """The image ``esi.local/esi:<version>-<digest>`` of the tree at ``repo``: built unless cached."""
    version = str(tomllib.loads((repo / "pyproject.toml").read_text())["project"]["version"])
    runtime = python_runtime()
    contents = (runtime / "debian-packages.txt").read_text()
    tag = f"{version}-{digest(contents, _sources_digest(repo), recipe(_install))}"

    def populate(rootfs: Path) -> None:
        link_tree(runtime, rootfs)
        (rootfs / "debian-packages.txt").unlink()
        _install(repo, rootfs)

    return images.build_image(
        "esi", tag, populate, entrypoint=(), env=_ENV, workdir="/app", user=f"{ESI_UID}:{ESI_UID}"
    )


def _install(repo: Path, rootfs: Path) -> None:
    """esi's wheel with its ``server`` extra into the image's site-packages; the server side into ``/app``."""
    with tempfile.TemporaryDirectory(prefix="esi-wheel-") as scratch:
        wheels, source = Path(scratch) / "wheels", Path(scratch) / "source"
        # The wheel is built from a copy of just what it is made of (no virtualenv or cache in the sdist).
        for path in _sources(repo):
            if path.parent == repo or path.is_relative_to(repo / "esi"):
                target = source / path.relative_to(repo)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        pip: list[str | Path] = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
        _run([*pip, "wheel", "--no-deps", "--wheel-dir", wheels, source], "build esi's wheel")
        (wheel,) = wheels.glob("esi-*.whl")
        site = rootfs / SITE_PACKAGES
        install = [*pip, "install", "--no-compile", "--no-warn-script-location", "--target", site]
        _run([*install, f"{wheel}[server]"], "install esi and its server extra")
    for package in SOURCE_PACKAGES:
        shutil.copytree(repo / package, rootfs / "app" / package, ignore=shutil.ignore_patterns("__pycache__"))


def _run(cmd: Sequence[str | Path], what: str) -> str:
    return commands.run(cmd, error=EsiImageError, what=what, timeout=900, last_lines=20)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m infra.images.esi",
        description="Build esi's image without a registry or a daemon (cached), or push it to a registry.",
    )
    commands_ = parser.add_subparsers(dest="command", required=True)
    images.add_image_commands(commands_, "registry.example.org/team/esi:0.1.0")
    args = parser.parse_args(argv)
    images.run_image_command(args, esi_image(), "pulumi config set -s cluster esi:image {}")


if __name__ == "__main__":
    main()
