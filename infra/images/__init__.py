"""Container images for real nodes, made on this machine: no registry is reachable here.

An image is made from a root filesystem directory: its files become the one layer of an OCI image (umoci),
which skopeo turns into a docker-archive; ``import_image`` loads that archive into one real node's
containerd (``ctr images import`` into the CRI's ``k8s.io`` namespace), only when the node lacks it.

``build_image`` is the generic step; ``pause_image`` (the pods' sandbox image, Kubernetes' own
``build/pause/linux/pause.c`` compiled statically from the pinned ``k8s.io/kubernetes`` module source) and
``busybox_image`` (Debian's static busybox, for small test workloads) are built with it.

Archives are cached in ``<toolchain cache>/images/`` (``~/.cache/esi/tools/images``), named after the
image's reference and a digest of its configuration. **The tag is the content's version:** an archive
whose name, tag and configuration are cached is reused without looking at the files again, so a caller
derives the tag from what goes into the root filesystem (a version, a digest of the sources).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra import toolchain
from infra.toolchain import commands

__all__ = [
    "BuiltImage",
    "ImageError",
    "add_image_commands",
    "alias_image",
    "build_image",
    "busybox_image",
    "cache_dir",
    "image_present",
    "import_image",
    "pause_image",
    "pause_source",
    "push_image",
    "run_image_command",
]

REGISTRY = "esi.local"  # no registry has this name: an image reference that can only be local
CTR = "/usr/bin/ctr"
CRI_NAMESPACE = "k8s.io"
BUSYBOX = Path("/bin/busybox")
BUSYBOX_APPLETS = ("sh", "cat", "echo", "env", "ls", "nc", "sleep", "test", "true", "false", "wget")


class ImageError(RuntimeError):
    """Building or importing an image failed; the message names the image, the command and its output."""


@dataclass(frozen=True)
class BuiltImage:
    """An image ready to import: its reference (what pods and containerd's ``sandbox_image`` name) and archive."""

    reference: str
    archive: Path


def cache_dir() -> Path:
    return toolchain.cache_root() / "images"


def _run(cmd: Sequence[str | Path], what: str, *, timeout: float = 600) -> str:
    return commands.run(cmd, error=ImageError, what=what, timeout=timeout, install_hint=" (make node-packages)")


def _layer(rootfs: Path, tar_path: Path) -> None:
    """The root filesystem as one uncompressed layer: sorted, times zeroed, ownership as on disk."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(rootfs.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(rootfs)), recursive=False, filter=normalise)


def build_image(
    name: str,
    tag: str,
    populate: Callable[[Path], None],
    *,
    entrypoint: Sequence[str],
    cmd: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    workdir: str = "/",
    user: str | None = None,
) -> BuiltImage:
    """The image ``<REGISTRY>/<name>:<tag>`` as a docker-archive, built unless it is cached.

    ``populate`` writes the root filesystem into the empty directory it is given (called only when the
    image is not cached); ``entrypoint``, ``cmd``, ``env``, ``workdir`` and ``user`` (``uid:gid``; root when
    None) are the image's configuration.
    """
    reference = f"{REGISTRY}/{name}:{tag}"
    variables = dict(env or {})
    config: dict[str, object] = {"entrypoint": list(entrypoint), "cmd": list(cmd), "env": variables, "workdir": workdir}
    if user is not None:
        config["user"] = user
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    archive = cache_dir() / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', f'{name}_{tag}')}-{digest}.tar"
    if archive.is_file():
        return BuiltImage(reference, archive)
    with commands.exclusive(cache_dir() / ".lock"):  # one builder at a time (parallel test workers)
        if archive.is_file():  # another worker built it while we waited
            return BuiltImage(reference, archive)
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".build-") as scratch:
            work = Path(scratch)
            rootfs, layout, layer = work / "rootfs", work / "oci", work / "layer.tar"
            rootfs.mkdir()
            populate(rootfs)
            _layer(rootfs, layer)
            image = f"{layout}:{tag}"
            _run(["umoci", "init", "--layout", layout], reference)
            _run(["umoci", "new", "--image", image], reference)
            _run(["umoci", "raw", "add-layer", "--image", image, layer], reference)
            options = [f"--config.entrypoint={part}" for part in entrypoint]
            options += [f"--config.cmd={part}" for part in cmd] or ["--clear=config.cmd"]
            options += [f"--config.env={key}={value}" for key, value in variables.items()]
            options += [f"--config.user={user}"] if user is not None else []
            _run(["umoci", "config", "--image", image, f"--config.workingdir={workdir}", *options], reference)
            staged = work / "image.tar"
            # The policy of /etc/containers is about pulling from registries; nothing is pulled here.
            _run(
                ["skopeo", "--insecure-policy", "copy", f"oci:{image}", f"docker-archive:{staged}:{reference}"],
                reference,
            )
            staged.rename(archive)
    return BuiltImage(reference, archive)


def image_present(reference: str, containerd_socket: Path) -> bool:
    """Whether the containerd behind ``containerd_socket`` holds ``reference`` for the CRI (kubelet's pods)."""
    listed = _run([CTR, "-a", containerd_socket, "-n", CRI_NAMESPACE, "images", "ls", "-q"], reference)
    return reference in listed.split()


def import_image(image: BuiltImage, containerd_socket: Path) -> None:
    """Load ``image`` into one node's containerd, unpacked for its snapshotter; nothing when it is there."""
    if not image_present(image.reference, containerd_socket):
        _run([CTR, "-a", containerd_socket, "-n", CRI_NAMESPACE, "images", "import", image.archive], image.reference)


def push_image(image: BuiltImage, destination: str) -> None:
    """Copy ``image`` to a registry (``registry.example.org/team/name:tag``) with skopeo: no daemon; skopeo
    reads the registry's credentials where ``skopeo login``/``docker login`` put them."""
    _run(
        ["skopeo", "copy", f"docker-archive:{image.archive}", f"docker://{destination}"],
        f"push to {destination}",
        timeout=1800,
    )


def add_image_commands(commands_: argparse._SubParsersAction[argparse.ArgumentParser], example: str) -> None:
    """The subcommands ``image`` (build if not cached; print reference and archive) and ``push DESTINATION``."""
    commands_.add_parser("image", help="build the image (if not cached); print its reference and archive")
    push = commands_.add_parser("push", help="copy the image to a registry with skopeo")
    push.add_argument("destination", help=f"where to, e.g. {example}")


def run_image_command(args: argparse.Namespace, image: BuiltImage, then: str) -> None:
    """Do what ``add_image_commands`` parsed; after a push, say ``then`` (``{}``: the destination)."""
    if args.command == "image":
        print(image.reference)
        print(image.archive)
        return
    push_image(image, args.destination)
    print(f"pushed {image.reference} as {args.destination}: {then.format(args.destination)}")


def alias_image(image: BuiltImage, reference: str, containerd_socket: Path) -> None:
    """Make an imported ``image`` known under ``reference`` too (a registry's name no pod here can pull, or a
    name without the content digest), replacing whatever that name stood for before."""
    ctr: list[str | Path] = [CTR, "-a", containerd_socket, "-n", CRI_NAMESPACE]
    _run([*ctr, "images", "tag", "--force", image.reference, reference], reference)


def pause_source(pins: dict[str, str] | None = None) -> Path:
    """``build/pause/linux/pause.c`` of the pinned ``k8s.io/kubernetes`` module (the toolchain build fetched it)."""
    version = (pins or toolchain.load_pins())["kubernetes"]
    module = f"k8s.io/kubernetes@v{version}"
    modcache = Path(_run(["go", "env", "GOMODCACHE"], "pause image").strip())
    source = modcache / module / "build" / "pause" / "linux" / "pause.c"
    if not source.is_file():
        # Not in the module cache (cleaned since `make tools`): the Go proxy has it.
        _run(["go", "mod", "download", module], "pause image", timeout=900)
    if not source.is_file():
        raise ImageError(f"pause image: {source} is missing after `go mod download {module}`")
    return source


def pause_image() -> BuiltImage:
    """The sandbox image: Kubernetes' pause, static, the image's only file; tagged with its release and source."""
    source = pause_source()
    match = re.search(r"^TAG \?= (\S+)$", (source.parent.parent / "Makefile").read_text(), re.MULTILINE)
    release = match[1] if match else "0"
    tag = f"{release}-{hashlib.sha256(source.read_bytes()).hexdigest()[:12]}"

    def populate(rootfs: Path) -> None:
        flags = ["-Os", "-Wall", "-Werror", "-static", "-s", f"-DVERSION=v{release}-esi"]
        _run(["gcc", *flags, "-o", rootfs / "pause", source], "pause image: compile pause.c")

    return build_image("pause", tag, populate, entrypoint=["/pause"])


def busybox_image() -> BuiltImage:
    """Debian's static busybox with a few applets (``sh``, ``wget``, ``nc``, ``sleep``, ...); entrypoint ``sh -c``."""
    if not BUSYBOX.is_file():
        raise ImageError(f"busybox image: {BUSYBOX} is missing (make node-packages)")
    tag = hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()[:12]

    def populate(rootfs: Path) -> None:
        (rootfs / "bin").mkdir()
        (rootfs / "tmp").mkdir(mode=0o1777)
        shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
        for applet in BUSYBOX_APPLETS:
            (rootfs / "bin" / applet).symlink_to("busybox")

    return build_image("busybox", tag, populate, entrypoint=["/bin/sh", "-c"], env={"PATH": "/bin"})
