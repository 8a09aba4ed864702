"""The FastAPI application: external scheduler REST + STOMP API and the kube-scheduler extender."""
