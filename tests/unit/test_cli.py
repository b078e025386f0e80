"""`lws validate` and `lws crd generate` as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from leaderworkerset.cli import main
from tests.toolkit.paths import REPO
from tests.toolkit.upstream_module import upstream_file

SAMPLES = REPO / "config" / "samples"

INVALID = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: 2cube
spec:
  replicas: -1
  groupReplacementPolicy: Immediate
  leaderWorkerTemplate:
    size: 0
    workerTemplate:
      spec:
        containers: [{name: c, image: i}]
"""


def test_validate_prints_the_defaulted_object() -> None:
    result = CliRunner().invoke(main, ["validate", str(SAMPLES / "worker-template-only.yaml")])
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxUnavailable"] == 1
    assert obj["spec"]["groupIdentity"] == "Ordinal"


def test_validate_lists_every_error_and_fails() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input=INVALID)
    assert result.exit_code == 1
    for fragment in (
        'LeaderWorkerSet.leaderworkerset.x-k8s.io "2cube" is invalid',
        'metadata.name: Invalid value: "2cube"',
        "spec.replicas: Invalid value: -1",
        "spec.leaderWorkerTemplate.size: Invalid value: 0",
        'spec.groupReplacementPolicy: Invalid value: "Immediate"',
    ):
        assert fragment in result.stderr


def test_validate_update_against_stored_object(tmp_path: Path) -> None:
    stored = tmp_path / "old.yaml"
    stored.write_text((SAMPLES / "worker-template-only.yaml").read_text())
    changed = (
        (SAMPLES / "worker-template-only.yaml")
        .read_text()
        .replace("replicas: 3", "replicas: 3\n  groupIdentity: Hash")
    )
    result = CliRunner().invoke(main, ["validate", "--old", str(stored), "-"], input=changed)
    assert result.exit_code == 1
    assert 'spec.groupIdentity: Invalid value: "Hash": field is immutable' in result.stderr


def test_validate_without_any_leaderworkerset() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input="kind: ConfigMap\n")
    assert result.exit_code != 0
    assert "no LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) or DisaggregatedSet" in result.output


# --- DisaggregatedSets, judged as LeaderWorkerSets are -------------------------------------------
INVALID_DS = """
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata:
  name: bad
spec:
  roles:
    - name: prefill
      spec:
        replicas: 1
        rolloutStrategy: {rollingUpdateConfiguration: {partition: 2}}
        leaderWorkerTemplate: {workerTemplate: {spec: {containers: [{name: c, image: i}]}}}
    - name: Decode
      spec:
        replicas: 1
        leaderWorkerTemplate: {workerTemplate: {spec: {containers: [{name: c, image: i}]}}}
"""


def test_validate_prints_the_defaulted_disaggregatedset() -> None:
    result = CliRunner().invoke(main, ["validate", str(SAMPLES / "disaggregatedset.yaml")])
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert obj["kind"] == "DisaggregatedSet"
    prefill, decode = obj["spec"]["roles"]
    rollout = prefill["spec"]["rolloutStrategy"]
    assert rollout["type"] == "RollingUpdate"
    assert rollout["rollingUpdateConfiguration"] == {
        "partition": 0,
        "maxUnavailable": 1,
        "maxSurge": 1,
    }
    assert decode["spec"]["leaderWorkerTemplate"]["size"] == 1
    # The CRD schema gives a role no Group Identity: the LeaderWorkerSet webhook does.
    assert "groupIdentity" not in decode["spec"] and "rolloutStrategy" not in decode["spec"]


@pytest.mark.parametrize(
    "sample", ["disaggregatedset_v1_disaggregatedset.yaml", "disaggregatedset_v1_3role.yaml"]
)
def test_validate_admits_upstream_s_own_disaggregatedset_samples(sample: str) -> None:
    """The samples upstream ships (its module at the pinned version, fetched at run
    time), which `lws validate` once answered with "no LeaderWorkerSet found"."""
    text = upstream_file(f"config/samples/{sample}")
    result = CliRunner().invoke(main, ["validate", "-"], input=text)
    assert result.exit_code == 0, result.output
    judged = [d for d in yaml.safe_load_all(result.stdout) if d]
    expected = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "DisaggregatedSet"]
    assert judged and len(judged) == len(expected)
    assert [d["metadata"]["name"] for d in judged] == [d["metadata"]["name"] for d in expected]


def test_validate_refuses_a_disaggregatedset_with_field_paths() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input=INVALID_DS)
    assert result.exit_code == 1
    assert 'DisaggregatedSet.disaggregatedset.x-k8s.io "bad" is invalid' in result.stderr
    assert 'spec.roles[1].name: Invalid value: "Decode"' in result.stderr
    partition = "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition"
    assert f"{partition}: Forbidden" in result.stderr


def test_validate_refuses_a_disaggregatedset_whose_role_no_lws_may_be() -> None:
    """What the DisaggregatedSet webhook refuses of a role's LeaderWorkerSets."""
    sized = INVALID_DS.replace("partition: 2", "maxSurge: 1").replace("Decode", "decode")
    sized = sized.replace("{workerTemplate:", "{size: 0, workerTemplate:", 1)
    result = CliRunner().invoke(main, ["validate", "-"], input=sized)
    assert result.exit_code == 1, result.output
    assert (
        "spec.roles[0].spec.leaderWorkerTemplate.size: Invalid value: 0: size must be equal or "
        "greater than 1" in result.stderr
    )


def test_validate_a_disaggregatedset_under_each_field_validation() -> None:
    unknown = (
        (SAMPLES / "disaggregatedset.yaml").read_text().replace("spec:\n", "spec:\n  bogus: 1\n", 1)
    )
    strict = CliRunner().invoke(main, ["validate", "-"], input=unknown)
    assert strict.exit_code == 1
    assert (
        'DisaggregatedSet in version "v1" cannot be handled as a DisaggregatedSet: '
        'strict decoding error: unknown field "spec.bogus"'
    ) in strict.stderr
    warn = CliRunner().invoke(main, ["validate", "--field-validation=Warn", "-"], input=unknown)
    assert warn.exit_code == 0, warn.output
    assert 'Warning: unknown field "spec.bogus"' in warn.stderr


def test_validate_a_disaggregatedset_update(tmp_path: Path) -> None:
    """Created under upstream, a set whose name leaves no room for its Services' names is
    refused on create but may still be edited: an update keeps the errors it had."""
    long_name = "set-" + "x" * 50
    created = (
        (SAMPLES / "disaggregatedset.yaml").read_text().replace("name: llm", f"name: {long_name}")
    )
    stored = tmp_path / "old.yaml"
    stored.write_text(created)
    refused = CliRunner().invoke(main, ["validate", "-"], input=created)
    assert refused.exit_code == 1
    assert 'spec.roles[0].name: Invalid value: "prefill": makes Service names' in refused.stderr
    edited = created.replace("replicas: 3", "replicas: 6")
    admitted = CliRunner().invoke(main, ["validate", "--old", str(stored), "-"], input=edited)
    assert admitted.exit_code == 0, admitted.output
    both_zero = edited.replace("maxSurge: 1", "maxSurge: 0\n            maxUnavailable: 0")
    still = CliRunner().invoke(main, ["validate", "--old", str(stored), "-"], input=both_zero)
    assert still.exit_code == 1
    assert "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration" in still.stderr


def test_validate_a_mixed_manifest() -> None:
    manifest = "\n---\n".join(
        [
            (SAMPLES / "worker-template-only.yaml").read_text(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n",
            (SAMPLES / "disaggregatedset.yaml").read_text(),
            INVALID_DS,
        ]
    )
    result = CliRunner().invoke(main, ["validate", "-"], input=manifest)
    assert result.exit_code == 1
    printed = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert [(d["kind"], d["metadata"]["name"]) for d in printed] == [
        ("LeaderWorkerSet", "workers-only"),
        ("DisaggregatedSet", "llm"),
    ]
    assert 'DisaggregatedSet.disaggregatedset.x-k8s.io "bad" is invalid' in result.stderr


def test_crd_generate_check(tmp_path: Path) -> None:
    target = tmp_path / "crd.yaml"
    runner = CliRunner()
    assert runner.invoke(main, ["crd", "generate", "--output", str(target)]).exit_code == 0
    assert (
        runner.invoke(main, ["crd", "generate", "--output", str(target), "--check"]).exit_code == 0
    )
    target.write_text("stale")
    stale = runner.invoke(main, ["crd", "generate", "--output", str(target), "--check"])
    assert stale.exit_code == 1
    assert "stale" in stale.output


def test_controller_without_a_cluster_configuration_says_so_without_a_trace(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-kubeconfig"
    result = CliRunner().invoke(
        main,
        ["controller", "--metrics-bind-address=0", "--health-probe-bind-address=0"],
        env={"KUBECONFIG": str(missing), "KUBERNETES_SERVICE_HOST": ""},
    )
    assert result.exit_code == 1
    assert f"unable to get the cluster's configuration: Configuration file {missing} not found" in (
        str(result.exception) + result.output
    )
    assert "Traceback" not in result.output


def test_crd_generate_kinds() -> None:
    runner = CliRunner()
    names = {}
    for kind in ("leaderworkersets", "disaggregatedsets", "disaggregatedsetrolescalers"):
        result = runner.invoke(main, ["crd", "generate", "--kind", kind])
        assert result.exit_code == 0, result.output
        crd = yaml.safe_load(result.output.split("---\n", 1)[1])
        names[kind] = crd["metadata"]["name"]
    assert names == {
        "leaderworkersets": "leaderworkersets.leaderworkerset.x-k8s.io",
        "disaggregatedsets": "disaggregatedsets.disaggregatedset.x-k8s.io",
        "disaggregatedsetrolescalers": "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io",
    }
    default = runner.invoke(main, ["crd", "generate"])
    assert (
        default.output
        == runner.invoke(main, ["crd", "generate", "--kind", "leaderworkersets"]).output
    )


def test_crd_generate_check_names_the_kind(tmp_path: Path) -> None:
    target = tmp_path / "crd.yaml"
    target.write_text("stale")
    stale = CliRunner().invoke(
        main, ["crd", "generate", "--kind", "disaggregatedsets", "--output", str(target), "--check"]
    )
    assert stale.exit_code == 1
    assert "--kind disaggregatedsets" in stale.output


SCHEDULED = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: inference
spec:
  replicas: 4
  scheduling:
    schedulingPolicy:
      gang: {minCount: 2}
    disruptionMode:
      all: {}
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        priorityClassName: inference-high
        containers: [{name: worker, image: example/worker:latest}]
"""


def test_validate_judges_scheduling_as_a_kubernetes_provider_with_the_gate_on() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input=SCHEDULED)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["spec"]["scheduling"]["disruptionMode"] == {"all": {}}
    wrong = SCHEDULED.replace("minCount: 2", "minCount: 3")
    result = CliRunner().invoke(main, ["validate", "-"], input=wrong)
    assert result.exit_code == 1
    assert (
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 3: "
        "must equal leaderWorkerTemplate.size" in result.stderr
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--scheduler-provider", "volcano"],
            "spec.scheduling.disruptionMode: Forbidden: "
            "the Volcano provider does not support typed disruption mode",
        ),
        (
            ["--scheduler-provider", "none"],
            "spec.scheduling: Required value: requires a configured scheduler provider",
        ),
        (
            ["--feature-gates", "WorkloadAwareScheduling=false"],
            "spec.scheduling: Forbidden: requires the WorkloadAwareScheduling feature gate",
        ),
        (
            ["--no-scheduling-api"],
            "spec.scheduling: Forbidden: scheduling.k8s.io/v1beta1 Workload API is not available",
        ),
    ],
    ids=["volcano", "no-provider", "gate-off", "no-api"],
)
def test_validate_judges_scheduling_against_the_given_manager(
    options: list[str], message: str
) -> None:
    result = CliRunner().invoke(main, ["validate", *options, "-"], input=SCHEDULED)
    assert result.exit_code == 1, result.output
    assert message in result.stderr


SCHEDULED_SET = """
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata:
  name: llm
spec:
  roles:
  - name: prefill
    spec:
      replicas: 1
      startupPolicy: LeaderReady
      scheduling: {}
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers: [{name: worker, image: example/worker:latest}]
  - name: decode
    spec:
      replicas: 1
      scheduling: {}
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers: [{name: worker, image: example/worker:latest}]
"""


def test_validate_judges_a_roles_scheduling_as_the_webhook_does() -> None:
    result = CliRunner().invoke(main, ["validate", "-"], input=SCHEDULED_SET)
    assert result.exit_code == 1, result.output
    assert (
        "spec.roles[0].spec.scheduling.schedulingPolicy.gang: Forbidden: "
        "gang scheduling is incompatible with startupPolicy LeaderReady" in result.stderr
    )
    fixed = SCHEDULED_SET.replace("      startupPolicy: LeaderReady\n", "")
    assert CliRunner().invoke(main, ["validate", "-"], input=fixed).exit_code == 0
    result = CliRunner().invoke(main, ["validate", "--no-scheduling-api", "-"], input=fixed)
    assert result.exit_code == 1
    assert "spec.roles[1].spec.scheduling: Forbidden: scheduling.k8s.io/v1beta1" in result.stderr


def test_validate_refuses_an_unknown_feature_gate() -> None:
    result = CliRunner().invoke(
        main, ["validate", "--feature-gates", "Gang=true", "-"], input=SCHEDULED
    )
    assert result.exit_code == 2
    assert 'unknown feature gate "Gang": supported values: "WorkloadAwareScheduling"' in (
        result.output
    )
