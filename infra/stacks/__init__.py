"""The Pulumi program's two stacks and what they run.

``local`` (``LocalEsi``: a local cluster, esi as supervised local processes) and ``cluster`` (``ClusterEsi``: esi
as Deployments in an existing cluster) are composed by the Pulumi program (``infra/__main__.py``), with ``gitops``
(the committed manifests). Both run the second kube-scheduler (``second_scheduler``) and the Spark operator
(``spark_operator``); the local one also the Flink stand-in (``flink_standin_process``). ``stack`` is what
``make up``/``down`` run (``pulumi_local``: the Pulumi CLI offline); ``crds`` writes the CRDs to ``crds/``.
``processes`` is the one table of esi's processes (command lines, health endpoints) every launcher builds from.
"""
