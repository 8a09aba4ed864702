"""The API process (``python -m api``): two FastAPI applications served on two listeners of one process.

=========================  ==============================================================================
``api.app``                the external scheduler API's application: routers, STOMP, UI, health, metrics
``api.routes``             the REST routes under ``/external``, one module per resource
``api.dependencies``       what a route is given (caller, namespace, cache, Kubernetes client), as aliases
``api.problems``           every refusal in one JSON shape; errors mapped to HTTP statuses in one place
``api.auth``               who the caller is and what they may do (a static token, or Kubernetes RBAC)
``api.cache``              Testbeds, BatchJobs and Schedulings as last seen, from watches
``api.stomp``              STOMP 1.2 over WebSocket at ``/scheduler``; ``api.notifications`` feeds it
``api.ui``                 the Manual Scheduler web page (``api/ui/``)
``api.extender``           the kube-scheduler extender: its own application, routes, index and feed
``api.health``             ``/healthz`` and ``/readyz``, for both applications
``api.metrics``            Prometheus metrics of both applications; ``api.logs`` their log lines
``api.threaded``           serving an application in a thread (tests, benchmarks)
=========================  ==============================================================================

The extender and the REST side share only the health, metrics and logging modules and the process's one
Testbed stream (``kube.watch.Stream``), which ``api.__main__`` runs for both.
"""

__all__: list[str] = []
