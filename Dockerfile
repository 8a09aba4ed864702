# The image esi's Deployments run in the `cluster` stack (infra/cluster_stack.py): `python -m operators` and
# `python -m api` (the Deployments give the command; there is no default one).
#
#   docker build -t <registry>/esi:<version> . && docker push <registry>/esi:<version>
#   pulumi config set -s cluster esi:image <registry>/esi:<version>
#
# Two stages: the wheel is built from the sources in the first, and only the installed package (with the
# exact pins of pyproject.toml) reaches the second.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Just what the wheel is built from (pyproject.toml lists these packages); the rest of the repository,
# virtualenvs and caches included, stays out.
COPY pyproject.toml README.md ./
COPY esi esi
COPY kube kube
COPY operators operators
COPY api api
COPY infra infra
COPY policies policies
COPY sim sim
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels
# The uid the Deployments' securityContext names (runAsUser 10001, runAsNonRoot): never root.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin esi
USER 10001:10001
WORKDIR /tmp
# API and extender (python -m api), operators' liveness endpoint (python -m operators).
EXPOSE 8082 8080 8081
