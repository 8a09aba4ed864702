"""Infrastructure: the Pulumi program, the toolchain builder and the local cluster library.

Importing this package must stay cheap and stdlib-only: `python3 -m infra.toolchain` runs before any
virtualenv exists.
"""
