# syntax=docker/dockerfile:1
# The controller image for a registry: the layout `make image` (hack/build-images.sh)
# builds without Docker, from Debian 12 with apt's python3:
#   /usr/local/lib/python3.11/dist-packages  the package and its pinned dependencies,
#                                            compiled at build time; no pip in the image
#   /usr/local/bin/lws                       ENTRYPOINT ["lws"], CMD ["controller"]
#   user 65532:65532 (nonroot)
#
#   docker build -t <registry>/leaderworkerset:<tag> . && docker push <registry>/leaderworkerset:<tag>
#
# The development machine has no Docker daemon, so this file is not built by the tests;
# tests/images/test_image_run.py runs what `make image` builds, and
# tests/integration/test_install.py runs the pip commands below into a fresh venv.

# --- builder: wheels for the package and every dependency, pinned by constraints.txt
# (cp311 wheels: Debian 12's python3 is 3.11), plus pip's own wheel to install them with
FROM python:3.11-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /build
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip wheel -c constraints.txt --wheel-dir /wheels . \
    && pip download --no-deps --only-binary=:all: --dest /pip "pip==$(pip --version | cut -d' ' -f2)" \
    && cp constraints.txt /wheels/

# --- runtime: Debian's python3, those wheels installed by pip run from its wheel (so
# pip itself is never installed), all bytecode compiled now
FROM debian:12-slim
# apt's Python is 3.11 (as the wheels); netbase gives /etc/services and /etc/protocols.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 ca-certificates netbase \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && echo 'nonroot:*:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'nonroot:*:65532:' >> /etc/group
# The root filesystem may be read-only: no bytecode is written at run time (all of it is
# compiled here, hash-based, so file dates do not matter), and the only writable places
# the manager needs are the certificate directory and /tmp (mount a tmpfs or an
# emptyDir there).
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    --mount=type=bind,from=builder,source=/pip,target=/pip \
    pip_wheel="$(echo /pip/pip-*.whl)" \
    && python3 "$pip_wheel/pip" install --no-index --find-links /wheels leaderworkerset \
        -c /wheels/constraints.txt --no-compile --no-cache-dir --break-system-packages \
        --root-user-action=ignore --disable-pip-version-check \
    && python3 -m compileall -q -f --invalidation-mode unchecked-hash \
        /usr/lib/python3.11 /usr/lib/python3/dist-packages /usr/local/lib/python3.11/dist-packages
USER 65532:65532
WORKDIR /
# webhooks, metrics, health probes
EXPOSE 9443 8443 8081
ENTRYPOINT ["lws"]
CMD ["controller"]
