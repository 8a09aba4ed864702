"""The UI's vendored Vega-Lite builds are the npm packages' files, unchanged, and the API serves them."""

from __future__ import annotations

import hashlib
import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.ui import STATIC, install

VENDOR = STATIC / "vendor"
# The sha256 of each file as npm's tarball holds it (api/ui/vendor/README.md names the versions).
PINNED = {
    "vega.min.js": "8f6a3587cf8d4f42c7e08120e3eb05d067e746d554e39d2dcf52acc0bd5ba28f",
    "vega-lite.min.js": "83e215e84e308ee8688fa6503ba0f1cf8a3c05c0d61df2841a0b92bf86809e00",
    "vega-embed.min.js": "b1455caba2fb1a72fb46025ba0ba1316e2dbc7f0dd40a3f6040172bf9c08ba91",
    "vega.LICENSE": "63727832aaf62004a2b249c933e327f3c90caf49e41a72f4bf436edf632cbda8",
    "vega-lite.LICENSE": "f618900fd0d64046963b29f40590cdd1e341a2f41449f99110d82fd81fea808c",
    "vega-embed.LICENSE": "32df67148f0fc3db0eb9e263a7b75d07f1eb14c61955005a4a39c6918d10d137",
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_vendored_file_is_the_one_pinned(name: str) -> None:
    assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == PINNED[name], f"{name} was changed"


def test_nothing_is_vendored_unpinned() -> None:
    assert {path.name for path in VENDOR.iterdir()} == {*PINNED, "README.md"}


def test_the_page_loads_each_build_from_the_api() -> None:
    app = FastAPI()
    install(app)
    page = (STATIC / "index.html").read_text()
    scripts = re.findall(r'<script defer src="(vendor/[^"]+)"></script>', page)

    assert scripts == ["vendor/vega.min.js", "vendor/vega-lite.min.js", "vendor/vega-embed.min.js"], "in this order"
    with TestClient(app) as client:
        for script in scripts:
            answer = client.get(f"/ui/{script}")
            assert answer.status_code == 200, script
            assert answer.headers["content-type"].startswith("text/javascript"), script
            assert answer.content == (STATIC / script).read_bytes()
