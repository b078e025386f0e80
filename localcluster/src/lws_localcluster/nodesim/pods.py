"""Per-pod runtime state kept by the simulator and the pod status a kubelet would write.

Everything here is synchronous and side-effect free apart from the state objects, so
the status rules (the part that must match the kubelet) can be unit-tested directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.objects import annotations_of, format_time
from lws_localcluster.nodesim.api import JsonObj

ANNOTATION_PREFIX = "nodesim.leaderworkerset.dev/"
TERMINATION_DELAY_ANNOTATION = ANNOTATION_PREFIX + "termination-delay-seconds"
STARTUP_DELAY_ANNOTATION = ANNOTATION_PREFIX + "startup-delay-seconds"

# Condition types the kubelet owns; every other type (readiness gates, DisruptionTarget,
# anything a controller adds) is left exactly as someone else wrote it.
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class ContainerRuntime:
    name: str
    image: str
    container_id: str
    started_at: str
    restart_count: int = 0
    last_terminated: JsonObj | None = None
    # Fault state: None follows the simulated default (ready once running).
    ready_override: bool | None = None
    # Between a simulated crash and the restart.
    crashed: bool = False


@dataclass
class Termination:
    """How a pod's containers ended: a fault (fail_pod) or the end of graceful deletion."""

    exit_code: int
    reason: str
    finished_at: str
    message: str | None = None
    pod_reason: str | None = None
    pod_message: str | None = None


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    node: str
    pod_ip: str
    start_time: str
    first_seen: float
    containers: dict[str, ContainerRuntime] = field(default_factory=dict)
    terminal: Termination | None = None
    stalled: bool = False
    termination_delay: float | None = None
    deletion_seen: float | None = None
    delete_sent: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


def new_container_id() -> str:
    return "containerd://" + secrets.token_hex(32)


def image_id(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()
    repository, _, tag = image.rpartition(":")
    # A colon before the last slash belongs to a registry port, not a tag.
    if not repository or "/" in tag:
        repository = image
    return f"{repository.split('@')[0]}@sha256:{digest}"


def adopt_containers(rt: PodRuntime, pod: JsonObj) -> None:
    """Take over containers already reported running, e.g. after a simulator restart,
    so restarting the simulator does not rewrite every pod."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        running = (cs.get("state") or {}).get("running")
        if not running or not cs.get("containerID"):
            continue
        rt.containers[cs["name"]] = ContainerRuntime(
            name=cs["name"],
            image=cs.get("image", ""),
            container_id=cs["containerID"],
            started_at=running.get("startedAt") or rt.start_time,
            restart_count=int(cs.get("restartCount") or 0),
            last_terminated=(cs.get("lastState") or {}).get("terminated"),
        )


def ensure_containers(rt: PodRuntime, pod: JsonObj, now: str) -> None:
    for spec in _runtime_containers(pod):
        if spec["name"] not in rt.containers:
            rt.containers[spec["name"]] = ContainerRuntime(
                name=spec["name"],
                image=spec.get("image", ""),
                container_id=new_container_id(),
                started_at=now,
            )


def _sidecars(pod: JsonObj) -> list[JsonObj]:
    init = (pod.get("spec") or {}).get("initContainers") or []
    return [c for c in init if c.get("restartPolicy") == "Always"]


def _runtime_containers(pod: JsonObj) -> list[JsonObj]:
    """Containers that keep running: regular ones and sidecars (restartable init)."""
    return [*_sidecars(pod), *((pod.get("spec") or {}).get("containers") or [])]


def _container_status(c: ContainerRuntime, terminal: Termination | None) -> JsonObj:
    status: JsonObj = {
        "name": c.name,
        "image": c.image,
        "imageID": image_id(c.image),
        "containerID": c.container_id,
        "restartCount": c.restart_count,
        "lastState": {"terminated": c.last_terminated} if c.last_terminated else {},
    }
    if terminal is not None:
        state: JsonObj = {
            "terminated": {
                "exitCode": terminal.exit_code,
                "reason": terminal.reason,
                "startedAt": c.started_at,
                "finishedAt": terminal.finished_at,
                "containerID": c.container_id,
                **({"message": terminal.message} if terminal.message else {}),
            }
        }
        return {**status, "state": state, "ready": False, "started": False}
    if c.crashed:
        waiting = {"reason": "CrashLoopBackOff", "message": "back-off restarting container"}
        return {**status, "state": {"waiting": waiting}, "ready": False, "started": False}
    ready = True if c.ready_override is None else c.ready_override
    return {
        **status,
        "state": {"running": {"startedAt": c.started_at}},
        "ready": ready,
        "started": True,
    }


def _init_container_status(spec: JsonObj, rt: PodRuntime) -> JsonObj:
    image = spec.get("image", "")
    return {
        "name": spec["name"],
        "image": image,
        "imageID": image_id(image),
        "containerID": "containerd://"
        + hashlib.sha256((rt.uid + spec["name"]).encode()).hexdigest(),
        "restartCount": 0,
        "ready": True,
        "started": False,
        "lastState": {},
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": rt.start_time,
                "finishedAt": rt.start_time,
            }
        },
    }


def _condition(
    kind: str, ok: bool, reason: str | None = None, message: str | None = None
) -> JsonObj:
    # reason/message are sent even when None: in a strategic merge patch null removes
    # a stale reason left over from an earlier state of the same condition.
    return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message}


def _readiness_gate_problem(pod: JsonObj) -> str | None:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    for gate in gates:
        kind = gate.get("conditionType")
        condition = conditions.get(kind)
        if condition is None:
            return f'corresponding condition of pod readiness gate "{kind}" does not exist.'
        if condition.get("status") != "True":
            return (
                f'the status of pod readiness gate "{kind}" is not "True", '
                f"but {condition.get('status')}"
            )
    return None


def _kubelet_conditions(pod: JsonObj, phase: str, statuses: list[JsonObj]) -> list[JsonObj]:
    terminal = phase in TERMINAL_PHASES
    unready = [s["name"] for s in statuses if not s["ready"]]
    if terminal:
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        containers_ready = _condition("ContainersReady", False, reason)
        ready = _condition("Ready", False, reason)
    elif unready:
        message = f"containers with unready status: [{' '.join(unready)}]"
        containers_ready = _condition("ContainersReady", False, "ContainersNotReady", message)
        ready = _condition("Ready", False, "ContainersNotReady", message)
    else:
        containers_ready = _condition("ContainersReady", True)
        gate_problem = _readiness_gate_problem(pod)
        ready = (
            _condition("Ready", False, "ReadinessGatesNotReady", gate_problem)
            if gate_problem
            else _condition("Ready", True)
        )
    return [
        _condition("PodReadyToStartContainers", not terminal),
        _condition("Initialized", True),
        containers_ready,
        ready,
    ]


def desired_status(pod: JsonObj, rt: PodRuntime, host_ip: str) -> JsonObj:
    """The status the kubelet would report for this pod, given the simulator's state."""
    spec = pod.get("spec") or {}
    terminal = rt.terminal
    statuses = [_container_status(rt.containers[c["name"]], terminal) for c in spec["containers"]]
    sidecars = [_container_status(rt.containers[c["name"]], terminal) for c in _sidecars(pod)]
    sidecar_by_name = {s["name"]: s for s in sidecars}
    init_statuses = [
        sidecar_by_name.get(c["name"]) or _init_container_status(c, rt)
        for c in spec.get("initContainers") or []
    ]
    phase = "Running"
    if terminal is not None:
        phase = "Succeeded" if terminal.exit_code == 0 else "Failed"
    status: JsonObj = {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": rt.pod_ip,
        "podIPs": [{"ip": rt.pod_ip}],
        "startTime": rt.start_time,
        "conditions": _kubelet_conditions(pod, phase, statuses + sidecars),
        "containerStatuses": statuses,
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if terminal is not None and terminal.pod_reason:
        status["reason"] = terminal.pod_reason
        status["message"] = terminal.pod_message
    return status


def _same_entries(current: list[Any] | None, desired: list[JsonObj]) -> bool:
    """Each desired entry matches the current one on the fields we write; fields others
    add (resources, volumeMounts, ...) are not ours to compare."""
    current = current or []
    if len(current) != len(desired):
        return False
    return all(
        isinstance(cur, dict) and all(cur.get(k) == v for k, v in want.items())
        for cur, want in zip(current, desired, strict=True)
    )


def status_patch(pod: JsonObj, desired: JsonObj, now: str | None = None) -> JsonObj | None:
    """A strategic merge patch for pods/status, or None when nothing we own differs.

    Returning None for an unchanged pod is what stops the simulator from reacting to
    the watch events of its own writes.
    """
    current = pod.get("status") or {}
    existing = {c.get("type"): c for c in current.get("conditions") or []}
    stamp = now or format_time()
    conditions: list[JsonObj] = []
    changed = False
    for want in desired["conditions"]:
        have = existing.get(want["type"])
        same_status = have is not None and have.get("status") == want["status"]
        if not (
            same_status
            and have is not None
            and have.get("reason") == want["reason"]
            and have.get("message") == want["message"]
        ):
            changed = True
        transition = have.get("lastTransitionTime") if same_status and have else stamp
        conditions.append({**want, "lastTransitionTime": transition})
    scheduled = existing.get("PodScheduled")
    if scheduled is None or scheduled.get("status") != "True":
        # Pods bound by nodeName skip the scheduler; the kubelet adds PodScheduled itself.
        changed = True
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp})
    for key in ("phase", "hostIP", "podIP", "startTime", "reason", "message"):
        if key in desired and current.get(key) != desired[key]:
            changed = True
    for key in ("hostIPs", "podIPs", "containerStatuses", "initContainerStatuses"):
        if key in desired and not _same_entries(current.get(key), desired[key]):
            changed = True
    if not changed:
        return None
    status = {**desired, "conditions": conditions}
    # IP lists merge by "ip" in a strategic merge patch; ours replace whatever is there.
    for key in ("hostIPs", "podIPs"):
        status[key] = [*desired[key], {"$patch": "replace"}]
    # The uid makes the patch fail instead of writing a newer pod that reuses the name.
    return {"metadata": {"uid": pod["metadata"]["uid"]}, "status": status}


def annotation_seconds(pod: JsonObj, annotation: str) -> float | None:
    value = annotations_of(pod).get(annotation)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
