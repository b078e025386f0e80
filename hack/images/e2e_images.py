"""The images upstream's release and upstream's e2e suite run, built here under the
names they use, for tests/e2e_real (only built when named: `make image` leaves them
out):

    upstream       registry.k8s.io/lws/lws:VERSION              upstream's manager
    nginx-standin  docker.io/nginxinc/nginx-unprivileged:1.27   stand-in: not nginx
    curl-standin   docker.io/curlimages/curl:7.78.0             stand-in: Debian's curl

`upstream` is the static binary hack/build-upstream-lws.sh builds from the Go module
proxy, at /manager in an otherwise empty image run as 65532, as upstream's Dockerfile
lays it out on distroless/static (which adds an empty /tmp; so does this). VERSION is
the one hack/upstream-lws/go.mod pins.

The two stand-ins exist because no registry is reachable. Each says so in its labels.
The suite needs of nginx-unprivileged only a non-root container that stays up, listens
on 8080 and stops on SIGTERM (standins/http_server.py on the Python base), and of
curl's image `/bin/sh -c "curl -v -k -H ... https://..."` (Debian's curl and dash).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import oci
import rootfs
from recipes import (
    HERE,
    NONROOT,
    PATH_ENV,
    PYTHON_ENV,
    REPO,
    Context,
    Recipe,
    base_history,
    code,
    ensure_base,
    sha256,
)

UPSTREAM_MODULE = "sigs.k8s.io/lws"
UPSTREAM_REPOSITORY = "registry.k8s.io/lws/lws"
NGINX_REF = "docker.io/nginxinc/nginx-unprivileged:1.27"
CURL_REF = "docker.io/curlimages/curl:7.78.0"
HTTP_SERVER = HERE / "standins" / "http_server.py"
STAND_IN = "stand-in built by leaderworkerset's hack/build-images.sh for upstream's e2e suite"


def upstream_version(go_mod: Path = REPO / "hack" / "upstream-lws" / "go.mod") -> str:
    found = re.search(rf"^\s*{re.escape(UPSTREAM_MODULE)} (v\S+)", go_mod.read_text(), re.M)
    if not found:
        raise SystemExit(f"build-images: {go_mod} requires no {UPSTREAM_MODULE}")
    return found.group(1)


def upstream_manager() -> Path:
    """The manager binary, from hack/build-upstream-lws.sh (cached after the first
    build, which takes minutes); the script's progress reaches stderr."""
    script = REPO / "hack" / "build-upstream-lws.sh"
    done = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"build-images: {script} failed with exit code {done.returncode}")
    return Path(done.stdout.strip().splitlines()[-1])


def upstream(ctx: Context) -> Recipe:
    version = upstream_version()
    binary = upstream_manager().read_bytes()
    key = sha256("upstream", version, binary, code("e2e_images.py", "oci.py"))
    ref = f"{UPSTREAM_REPOSITORY}:{version}"
    return Recipe("upstream", ref, key, lambda ctx: _build_upstream(ctx, ref, version, binary))


def _build_upstream(ctx: Context, ref: str, version: str, binary: bytes) -> oci.Image:
    def fill(tar: oci.LayerWriter) -> None:
        oci.add_file(tar, "manager", binary, 0o755)
        oci.add_dir(tar, "tmp", 0o1777)

    layer = ctx.store.put_layer(fill)
    spec = oci.ImageSpec(
        user=NONROOT,
        entrypoint=["/manager"],
        labels={
            "org.opencontainers.image.title": "lws (upstream's manager)",
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.source": f"{UPSTREAM_MODULE}@{version} (Go module proxy)",
            "org.opencontainers.image.description": (
                "upstream's manager built from its Go module by hack/build-upstream-lws.sh, "
                "laid out as upstream's Dockerfile does"
            ),
        },
    )
    history = [f"COPY manager (go build {UPSTREAM_MODULE}/cmd@{version}, static)"]
    return oci.assemble(ctx.store, ref, spec, [layer], history, ctx.arch)


def nginx_standin(ctx: Context) -> Recipe:
    program = HTTP_SERVER.read_bytes()
    key = sha256("nginx-standin", ctx.base_key, program, code("e2e_images.py"))
    return Recipe("nginx-standin", NGINX_REF, key, lambda ctx: _build_nginx(ctx, program))


def _build_nginx(ctx: Context, program: bytes) -> oci.Image:
    base = ensure_base(ctx)
    layer = ctx.store.put_layer(lambda tar: oci.add_file(tar, "http_server.py", program, 0o644))
    spec = oci.ImageSpec(
        user=NONROOT,
        entrypoint=["python3", "/http_server.py"],
        env=[PATH_ENV, *PYTHON_ENV],
        exposed_ports=[8080],
        labels=_standin_labels(NGINX_REF, "Python's http.server on 8080, not nginx"),
    )
    history = [base_history(), "COPY standins/http_server.py /http_server.py"]
    return oci.assemble(ctx.store, NGINX_REF, spec, [base.layer, layer], history, ctx.arch)


def curl_standin(ctx: Context) -> Recipe:
    packages = rootfs.CURL_PACKAGES
    key = sha256("curl-standin", ctx.base_key_of(packages), code("e2e_images.py"))
    return Recipe("curl-standin", CURL_REF, key, lambda ctx: _build_curl(ctx, packages))


def _build_curl(ctx: Context, packages: tuple[str, ...]) -> oci.Image:
    base = ensure_base(ctx, packages)
    spec = oci.ImageSpec(
        user=NONROOT,
        entrypoint=["curl"],
        env=[PATH_ENV],
        labels=_standin_labels(CURL_REF, "Debian bookworm's curl and /bin/sh, not curl 7.78.0"),
    )
    history = [base_history(packages)]
    return oci.assemble(ctx.store, CURL_REF, spec, [base.layer], history, ctx.arch)


def _standin_labels(ref: str, what: str) -> dict[str, str]:
    return {
        "org.opencontainers.image.title": f"stand-in for {ref}",
        "org.opencontainers.image.description": f"{STAND_IN}: {what}",
    }


RECIPES: dict[str, Callable[[Context], Recipe]] = {
    "upstream": upstream,
    "nginx-standin": nginx_standin,
    "curl-standin": curl_standin,
}
# Every base an image here or in recipes.py is built on (old ones are pruned).
BASES = (rootfs.PACKAGES, rootfs.CURL_PACKAGES)
