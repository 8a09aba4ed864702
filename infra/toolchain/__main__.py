"""``python3 -m infra.toolchain``: build, cache and locate the local environment's binaries."""

import sys

from infra.toolchain import main

sys.exit(main())
