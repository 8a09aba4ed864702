"""Infrastructure: the Pulumi program and the local environment it runs, in four packages by role.

Lowest first (the import contract ``infra-rooms`` checks the order): ``toolchain`` (the binaries built for this
machine and Debian's packages; standard library only), ``images`` (container images made without a registry),
``local_cluster`` (a control plane on this machine, its real nodes and their network), ``stacks`` (the Pulumi
program's two stacks and what they run). ``infra/__main__.py`` is the Pulumi program (Pulumi.yaml: ``main: infra/``).

Importing this package must stay cheap and stdlib-only: ``python3 -m infra.toolchain`` runs before any
virtualenv exists.
"""
