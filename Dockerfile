# syntax=docker/dockerfile:1
# The manager image: `lws controller` and its pinned dependencies, nothing else.
#
#   docker build -t <registry>/leaderworkerset:<tag> .
#
# tests/integration/test_install.py runs the same two pip commands into a fresh
# virtual environment and starts the controller from it.

# --- builder: wheels for the package and every dependency, pinned by constraints.txt
FROM python:3.11-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /build
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip wheel -c constraints.txt --wheel-dir /wheels .

# --- runtime: only those wheels; no compilers, no pip
FROM python:3.11-slim
# The root filesystem may be read-only: no bytecode is written at run time (pip
# compiles it at install), and the only writable places the manager needs are the
# certificate directory and /tmp (mount a tmpfs or an emptyDir there).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels leaderworkerset \
    && pip uninstall -y setuptools wheel pip
USER 65532:65532
# webhooks, metrics, health probes
EXPOSE 9443 8443 8081
ENTRYPOINT ["lws"]
CMD ["controller"]
