"""The Kubernetes objects esi creates, as plain manifests, and how esi reads them back.

``names`` holds the labels, priority classes and scheduler name every component must agree on;
``ghosts`` the ghost pods that hold free slots; ``pod_status`` what a pod's status says about its
placement; ``applications`` the SparkApplication or FlinkDeployment of a run; ``holds`` the Leases by which
a Scheduling holds its Testbed and jobs; ``priority`` the two PriorityClasses; ``owners`` the owner
references that tie each of them to its owner.
"""
