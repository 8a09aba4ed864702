"""The simulated Spark and Flink application operators for local (KWOK) clusters: ``python -m sim``.

On a local cluster no container runs, so nothing would act on the SparkApplications and FlinkDeployments
esi creates. This package stands in for the kubeflow Spark operator and the Apache Flink Kubernetes
operator: it creates the pods they would create, named and labelled as they name and label them
(``pods``), reports the application status they would report (``lifecycle``), and ends each run after a
time that a workload model decides from the jobs sharing its nodes (``runtime``). ``crds`` holds the two
CustomResourceDefinitions a local cluster gets instead of the operators' own; ``controller`` is the kopf
shell that reads the cluster, calls the pure parts and writes.
"""
