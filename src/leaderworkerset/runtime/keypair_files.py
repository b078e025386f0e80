"""A serving key pair kept in two files (a mounted Secret), loaded into a live
SSLContext and loaded again whenever the files change.

This is what controller-runtime's certwatcher does for the webhook and the metrics
servers: the kubelet swaps a Secret volume's files when the Secret changes (a
rotation, a cert-manager renewal), and new handshakes must present the new pair
without a restart.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

from leaderworkerset.runtime.certs import load_key_pair
from leaderworkerset.runtime.metrics import RuntimeMetrics


class KeyPairFiles:
    """`tls.crt`/`tls.key` (or other names) on disk, and the pair last loaded from them."""

    def __init__(
        self,
        cert_path: Path,
        key_path: Path,
        log: logging.Logger,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.cert_path = cert_path
        self.key_path = key_path
        self.log = log
        self.metrics = metrics
        self._loaded: tuple[bytes, bytes] | None = None
        self._stamp: tuple[tuple[int, int, int], ...] | None = None
        self._refused: tuple[tuple[int, int, int], ...] | None = None

    @property
    def loaded(self) -> tuple[bytes, bytes] | None:
        """The (cert, key) PEM last loaded; one read of a tuple set whole, so any
        thread may ask."""
        return self._loaded

    def exist(self) -> bool:
        return self.cert_path.exists() and self.key_path.exists()

    def load_into(self, ctx: ssl.SSLContext) -> bool:
        """Load the files into `ctx` if they changed since the last load and form a valid
        pair; True when loaded. Not thread-safe: callers serialize their calls."""
        try:
            stamp = (_stat_stamp(self.cert_path), _stat_stamp(self.key_path))
            if stamp == self._stamp and self._loaded is not None:
                return False
            if stamp == self._refused:
                # Read and refused already; wait for either file to change.
                return False
            cert, key = self.cert_path.read_bytes(), self.key_path.read_bytes()
        except FileNotFoundError:
            return False
        if self._loaded == (cert, key):
            self._stamp = stamp
            return False
        if self.metrics is not None:
            self.metrics.certificate_reads.inc()
        try:
            # A scratch context first: a mismatched pair (caught mid-rotation) loaded into
            # the live context would leave it with a certificate and no key.
            load_key_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, key)
            load_key_pair(ctx, cert, key)
        except (ssl.SSLError, OSError, ValueError) as exc:
            if self.metrics is not None:
                self.metrics.certificate_read_errors.inc()
            self.log.info("certificate files not loadable yet: %s", exc)
            self._refused = stamp
            return False
        self._loaded, self._stamp = (cert, key), stamp
        self.log.info("loaded serving certificate", extra={"cert": str(self.cert_path)})
        return True


def _stat_stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)  # follows the kubelet's ..data symlinks to the current files
    return st.st_ino, st.st_mtime_ns, st.st_size
