"""The manager stays available through node drains and a node's loss: the rendered
PodDisruptionBudget and topology spread constraint, in the chart and in config/, and
the requests both install paths ask for."""

from __future__ import annotations

from typing import Any

import pytest

from tests.toolkit.render import CONFIG, Key, Obj, Renderer

PDB = ("PodDisruptionBudget", "lws-controller-manager")
DEPLOYMENT = ("Deployment", "lws-controller-manager")
SELECTOR = {
    "control-plane": "controller-manager",
    "app.kubernetes.io/name": "lws",
    "app.kubernetes.io/instance": "lws",
}
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": SELECTOR},
    "matchLabelKeys": ["pod-template-hash"],
}
REQUESTS = {"cpu": "250m", "memory": "192Mi"}


def pod_spec(objs: dict[Key, Obj], key: Key = DEPLOYMENT) -> Obj:
    spec: Obj = objs[key]["spec"]["template"]["spec"]
    return spec


def test_chart_default_budget_and_spreading(renderer: Renderer) -> None:
    objs = renderer.helm_template()
    deployment = objs[DEPLOYMENT]
    assert deployment["spec"]["replicas"] == 2
    budget = objs[PDB]["spec"]
    assert budget == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": SELECTOR},
    }
    # The budget and the spreading select exactly the Deployment's pods.
    assert budget["selector"] == deployment["spec"]["selector"]
    assert pod_spec(objs)["topologySpreadConstraints"] == [SPREAD]
    (container,) = pod_spec(objs)["containers"]
    assert container["resources"] == {"requests": REQUESTS}


def test_kustomize_renders_the_same(renderer: Renderer) -> None:
    chart = renderer.helm_template()
    for overlay in ("default", "certmanager"):
        objs = renderer.kustomize(CONFIG / overlay)
        assert objs[PDB]["spec"] == chart[PDB]["spec"], overlay
        assert pod_spec(objs)["topologySpreadConstraints"] == [SPREAD], overlay
        assert pod_spec(objs)["containers"][0]["resources"] == {"requests": REQUESTS}, overlay


def test_selectors_follow_the_release_and_name(renderer: Renderer) -> None:
    objs = renderer.helm_template({"nameOverride": "leaders"}, release="team-a")
    key = ("PodDisruptionBudget", "team-a-leaders-controller-manager")
    deployment = objs[("Deployment", "team-a-leaders-controller-manager")]
    want = {
        "control-plane": "controller-manager",
        "app.kubernetes.io/name": "leaders",
        "app.kubernetes.io/instance": "team-a",
    }
    assert objs[key]["spec"]["selector"]["matchLabels"] == want
    assert deployment["spec"]["selector"]["matchLabels"] == want
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"] == {"matchLabels": want}


@pytest.mark.parametrize(
    ("budget", "spec"),
    [
        ({"minAvailable": 1}, {"minAvailable": 1}),
        ({"maxUnavailable": "50%"}, {"maxUnavailable": "50%"}),
        ({"maxUnavailable": 0}, {"maxUnavailable": 0}),
        ({"unhealthyPodEvictionPolicy": None}, {"maxUnavailable": 1}),
    ],
)
def test_budget_values(renderer: Renderer, budget: dict[str, Any], spec: dict[str, Any]) -> None:
    objs = renderer.helm_template({"podDisruptionBudget": budget})
    rendered = dict(objs[PDB]["spec"])
    rendered.pop("selector")
    if budget.get("unhealthyPodEvictionPolicy", "AlwaysAllow") == "AlwaysAllow":
        assert rendered.pop("unhealthyPodEvictionPolicy") == "AlwaysAllow"
    assert rendered == spec


def test_budget_and_spreading_can_be_turned_off(renderer: Renderer) -> None:
    objs = renderer.helm_template(
        {"podDisruptionBudget": {"enabled": False}, "topologySpreadConstraints": []}
    )
    assert PDB not in objs
    assert "topologySpreadConstraints" not in pod_spec(objs)


def test_constraints_given_are_completed_with_the_selector(renderer: Renderer) -> None:
    zone = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
    }
    own = {**zone, "labelSelector": {"matchLabels": {"tier": "control"}}}
    objs = renderer.helm_template({"topologySpreadConstraints": [zone, own]})
    assert pod_spec(objs)["topologySpreadConstraints"] == [
        {
            **zone,
            "labelSelector": {"matchLabels": SELECTOR},
            "matchLabelKeys": ["pod-template-hash"],
        },
        own,
    ]
