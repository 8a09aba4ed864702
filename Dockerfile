# The image esi's Deployments run in the `cluster` stack (infra/stacks/cluster.py): `python -m operators` and
# `python -m api` (the Deployments give the command; there is no default one).
#
#   docker build -t <registry>/esi:<version> . && docker push <registry>/esi:<version>
#   pulumi config set -s cluster esi:image <registry>/esi:<version>
#
# Without a daemon, the same layout on Debian's Python: python -m infra.images.esi image | push <destination>.
#
# Two stages: the wheel of esi (the package `esi` alone) is built in the first; the second installs it with
# its `server` extra (the exact pins of pyproject.toml) and copies the folders that run from source beside it.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Just what the wheel is built from; the rest of the repository, virtualenvs and caches included, stays out.
COPY pyproject.toml README.md ./
COPY esi esi
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install "$(echo /wheels/esi-*.whl)[server]" && rm -rf /wheels
# The server side is not in the wheel: its folders run from /app, which is on sys.path whatever the working
# directory (PYTHONPATH). Owned by root and read-only to the user below, like the rest of the image.
ENV PYTHONPATH=/app
WORKDIR /app
COPY kube kube
COPY operators operators
COPY api api
COPY sim sim
# The uid the Deployments' securityContext names (runAsUser 10001, runAsNonRoot): never root.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin esi
USER 10001:10001
# API and extender (python -m api), operators' liveness endpoint (python -m operators).
EXPOSE 8082 8080 8081
