"""How a pod webhook refuses a pod: the denial error, the pod's name as the
denial shows it, and Go's integer parsing with its error text as the message."""

from __future__ import annotations

from leaderworkerset.api.go.ints import GoIntError, go_atoi
from leaderworkerset.api.objects import meta_of
from leaderworkerset.webhooks.nested import Pod


class Denied(Exception):
    """An admission denial; `message` is what the API server shows the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def atoi(text: str) -> int:
    """Parse like Go's strconv.Atoi, denying with its exact error text."""
    try:
        return go_atoi(text)
    except GoIntError as exc:
        raise Denied(str(exc)) from None


def display_name(pod: Pod) -> str:
    """The pod's name, or its generateName while the API server has not named it
    (Hash-mode leaders), so that denials still say which pod was refused."""
    meta = meta_of(pod)
    return str(meta.get("name") or meta.get("generateName") or "")
