"""esi's local stand-in for the Apache Flink Kubernetes operator: ``python -m flink_standin``.

The Flink Kubernetes operator is not served by any registry reachable here, but the part of it that matters
for slots is Flink's, not the operator's: the operator only turns a FlinkDeployment into Flink's
configuration and pod templates and runs Flink's own client, whose JobManager (native Kubernetes,
application mode) then creates the TaskManager pods itself. The stand-in does those steps with the real
Flink distribution (``infra.images.flink``) for the FlinkDeployments of the namespaces it is given, on a local
cluster with real nodes:

* ``submission``: the FlinkDeployment's spec as the operator's ``FlinkConfigBuilder`` turns it into a Flink
  configuration (image, pull policy, service account, resources, replicas x task slots as the parallelism,
  the job's jar, class and arguments, the FlinkDeployment as the JobManager Deployment's owner, the
  application cluster kept when its job ends) and pod templates (merged as the operator merges them);
  plus what a local cluster without DNS or kube-proxy needs (below);
* ``status``: the status the operator reports (``lifecycleState``, ``jobManagerDeploymentStatus``,
  ``jobStatus`` from the JobManager's REST API, ``error``), from what is observed;
* ``controller``: the loop that submits (``flink run --target kubernetes-application`` on this machine),
  observes and writes the status.

What it does not do that the operator does: upgrades, suspend and savepoints (``job.state``,
``upgradeMode`` other than stateless), session clusters and standalone mode, the JobManager's startup
probe, deleting a finished application cluster after ``kubernetes.operator.jm-deployment.shutdown-ttl``
(esi deletes the FlinkDeployment once its run is recorded), the autoscaler, ingress, log configuration and
the operator's webhook. What it adds for a local cluster: the pods' ``KUBERNETES_SERVICE_HOST``/``PORT`` name
the API server's address on the pod network (there is no kube-proxy behind the ``kubernetes`` Service);
Kubernetes high availability is on, because its leader ConfigMaps give TaskManagers the JobManager's pod
IP (there is no DNS for its Service); TaskManagers' addresses are not looked up by name.
"""
