"""The files of deploy/ start what they say, checked offline (no Docker
engine or cluster here): every YAML file parses; compose.yaml is valid under
the Compose Specification's JSON schema; each Kubernetes manifest is valid
under its kind's schema (Kubernetes v1.33, strict: unknown fields are errors;
KEDA's ScaledObject CRD); the generated files are current; and the files
agree with each other and with the code (roles, queues, shutdown grace,
agentloop commands). The schemas are vendored under tests/schemas/ (see its
README.md)."""

from __future__ import annotations

import argparse
import copy
import importlib.util
import inspect
import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agentloop.cli.parser import build_parser
from agentloop.shared.definition.lanes import lane_queue
from agentloop.workers.worker import build_worker, tool_task_queue
from tests.helpers.paths import ROOT

DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SCHEMAS = ROOT / "tests" / "schemas"
#: Each manifest kind's schema: (apiVersion, kind) -> file under tests/schemas/.
KIND_SCHEMAS = {
    ("apps/v1", "Deployment"): "kubernetes/v1.33.0/deployment-apps-v1.json",
    ("v1", "Service"): "kubernetes/v1.33.0/service-v1.json",
    ("v1", "ConfigMap"): "kubernetes/v1.33.0/configmap-v1.json",
    ("batch/v1", "Job"): "kubernetes/v1.33.0/job-batch-v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "keda/scaledobject_v1alpha1.json",
}
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@cache
def validator(schema_file: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / schema_file).read_text())
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def errors(schema_file: str, document: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator(schema_file).iter_errors(document)]


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object of deploy/kubernetes/, with its file's name."""
    return [(path.name, doc) for path in sorted(KUBERNETES.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def objects(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}


def pod_env(deployment: dict[str, Any]) -> dict[str, str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def env_from(deployment: dict[str, Any]) -> list[tuple[str, str]]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [(kind, ref["name"]) for source in container.get("envFrom", []) for kind, ref in source.items()]


def grace_seconds(text: str) -> int:
    """Compose's duration (``45s``, ``1m30s``) in seconds."""
    total, number = 0, ""
    for char in text:
        if char.isdigit():
            number += char
        else:
            total += int(number) * {"s": 1, "m": 60, "h": 3600}[char]
            number = ""
    return total


def worker_grace() -> int:
    """How long ``agentloop worker`` lets in-flight activities finish on SIGTERM."""
    return int(inspect.signature(build_worker).parameters["graceful_shutdown_timeout"].default.total_seconds())


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.yaml")), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert documents and all(isinstance(d, dict) for d in documents), f"{path} holds no mapping"


def test_the_compose_file_is_valid_under_the_compose_specification() -> None:
    assert errors("compose-spec.json", compose()) == []


def test_the_compose_schema_catches_a_mistake() -> None:
    broken = copy.deepcopy(compose())
    broken["services"]["models"]["stop_grace_periods"] = "45s"
    broken["services"]["tools"]["depends_on"] = {"search-attributes": {"condition": "when_ready"}}
    found = errors("compose-spec.json", broken)
    assert any("stop_grace_periods" in e for e in found) and any("when_ready" in e for e in found), found


@pytest.mark.parametrize("index", range(len(manifests())),
                         ids=[f"{f}:{d['kind']}/{d['metadata']['name']}" for f, d in manifests()])
def test_each_kubernetes_manifest_is_valid_under_its_kinds_schema(index: int) -> None:
    _, doc = manifests()[index]
    schema = KIND_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    assert schema, f"no vendored schema for {doc['apiVersion']} {doc['kind']}: add it to tests/schemas/"
    assert errors(schema, doc) == []


def test_the_kubernetes_schemas_catch_mistakes() -> None:
    deployment = copy.deepcopy(objects("Deployment")["agentloop-models"])
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 45
    deployment["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "X", "value": 3})
    found = errors(KIND_SCHEMAS["apps/v1", "Deployment"], deployment)
    assert any("terminationGracePeriod" in e for e in found) and any("env/" in e for e in found), found
    scaled = copy.deepcopy(objects("ScaledObject")["agentloop-models"])
    del scaled["spec"]["scaleTargetRef"]
    scaled["spec"]["triggers"][0]["metadata"]["targetQueueSize"] = 10
    found = errors(KIND_SCHEMAS["keda.sh/v1alpha1", "ScaledObject"], scaled)
    assert any("scaleTargetRef" in e for e in found) and any("targetQueueSize" in e for e in found), found


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["resources"]
    files = sorted(p.name for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == files


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("deploy_generate", DEPLOY / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current() -> None:
    for path, text in load_generator().generated().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run `python deploy/generate.py`"


def test_compose_registers_the_search_attributes_before_anything_uses_them() -> None:
    services = compose()["services"]
    setup = services["search-attributes"]
    mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in setup["volumes"]}
    script = setup["entrypoint"][-1]
    assert mounted[script] == "./register-search-attributes.sh" and (DEPLOY / mounted[script]).is_file()
    assert setup["image"] == load_generator().ADMIN_TOOLS
    for name in ("models", "tools", "serve"):
        assert services[name]["depends_on"]["search-attributes"]["condition"] == "service_completed_successfully"


def test_kubernetes_runs_the_registration_script() -> None:
    (job,) = objects("Job").values()
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    (container,) = job["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    folder, _, file = container["command"][-1].rpartition("/")
    config_map = objects("ConfigMap")[volumes[mounts[folder]]["configMap"]["name"]]
    assert config_map["data"][file] == (DEPLOY / "register-search-attributes.sh").read_text()


def test_worker_roles_and_keys() -> None:
    services = compose()["services"]
    assert services["models"]["environment"]["AGENTLOOP_WORKER_ROLE"] == "models"
    assert services["tools"]["environment"]["AGENTLOOP_WORKER_ROLE"] == "tools"
    assert set(PROVIDER_KEYS) <= set(services["models"]["environment"])
    deployments = objects("Deployment")
    assert pod_env(deployments["agentloop-models"])["AGENTLOOP_WORKER_ROLE"] == "models"
    assert pod_env(deployments["agentloop-tools"])["AGENTLOOP_WORKER_ROLE"] == "tools"
    assert ("secretRef", "agentloop-providers") in env_from(deployments["agentloop-models"])
    for name, service in services.items():
        if name != "models":
            assert not set(PROVIDER_KEYS) & set(service.get("environment", {})), f"{name} gets provider keys"
    for name, deployment in deployments.items():
        if name != "agentloop-models":
            assert ("secretRef", "agentloop-providers") not in env_from(deployment), f"{name} gets provider keys"
            assert not set(PROVIDER_KEYS) & set(pod_env(deployment))
    for deployment in deployments.values():
        assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_scaling_follows_each_roles_task_queue() -> None:
    config = objects("ConfigMap")["agentloop-temporal"]["data"]
    deployments = objects("Deployment")
    queues = {"models": (config["AGENTLOOP_TASK_QUEUE"], {"workflow", "activity"}),
              "tools": (tool_task_queue(config["AGENTLOOP_TASK_QUEUE"]), {"activity"})}
    scaled = objects("ScaledObject")
    assert {so["spec"]["scaleTargetRef"]["name"] for so in scaled.values()} == {"agentloop-models", "agentloop-tools"}
    for so in scaled.values():
        target = deployments[so["spec"]["scaleTargetRef"]["name"]]
        assert "replicas" not in target["spec"], "the ScaledObject owns the replica count"
        role = pod_env(target)["AGENTLOOP_WORKER_ROLE"]
        wanted = [queues[role]]
        if role == "models":  # and the backlogs of the providers' lanes (docs/many-tenants.md)
            wanted += [(lane_queue(config["AGENTLOOP_TASK_QUEUE"], lane), {"activity"})
                       for lane in ("openai", "anthropic")]
        assert len(so["spec"]["triggers"]) == len(wanted)
        for trigger, (queue, types) in zip(so["spec"]["triggers"], wanted, strict=True):
            meta = trigger["metadata"]
            assert trigger["type"] == "temporal"
            assert (meta["endpoint"], meta["namespace"]) == (config["TEMPORAL_ADDRESS"], config["TEMPORAL_NAMESPACE"])
            assert meta["taskQueue"] == queue and set(meta["queueTypes"].split(",")) == types
        assert so["spec"]["minReplicaCount"] >= 1, "a run that waits needs a worker to answer its queries"


def test_shutdown_grace_covers_the_workers_drain() -> None:
    drain = worker_grace()
    assert drain == 30
    for name in ("models", "tools"):
        assert grace_seconds(compose()["services"][name]["stop_grace_period"]) > drain
    for name in ("agentloop-models", "agentloop-tools"):
        pod = objects("Deployment")[name]["spec"]["template"]["spec"]
        pre_stop = pod["containers"][0].get("lifecycle", {}).get("preStop")
        assert pre_stop is None, "a preStop delay keeps a worker polling before SIGTERM starts its drain"
        assert pod["terminationGracePeriodSeconds"] > drain
    serve = objects("Deployment")["agentloop-serve"]["spec"]["template"]["spec"]
    sleep = int(serve["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert serve["terminationGracePeriodSeconds"] > sleep + 3  # uvicorn's own graceful shutdown: 3 s
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    entrypoint = next(line for line in dockerfile.splitlines() if line.startswith("ENTRYPOINT"))
    assert json.loads(entrypoint.removeprefix("ENTRYPOINT")) == ["agentloop", "worker"], \
        "exec form, so SIGTERM reaches agentloop itself"


def agentloop_commands() -> list[tuple[str, list[str]]]:
    """Every agentloop command line the deploy files run."""
    found = [(f"compose {name}", service["entrypoint"]) for name, service in compose()["services"].items()
             if service.get("entrypoint", [""])[0] == "agentloop"]
    for _, doc in manifests():
        if doc["kind"] == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                found.append((f"kubernetes {doc['metadata']['name']}",
                              container.get("command", ["agentloop", "worker"]) + container.get("args", [])))
    return found


@pytest.mark.parametrize("where,command", agentloop_commands(), ids=[w for w, _ in agentloop_commands()])
def test_each_agentloop_command_parses(where: str, command: list[str]) -> None:
    assert command[0] == "agentloop", f"{where}: {shlex.join(command)}"
    parser = build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert command[1] in subcommands, f"{where}: `agentloop {command[1]}` is not a command of this build"
    parser.parse_args(command[1:])


def test_third_party_images_are_pinned() -> None:
    images = [service["image"] for service in compose()["services"].values() if "image" in service]
    images += [c["image"] for _, doc in manifests() if doc["kind"] in ("Deployment", "Job")
               for c in doc["spec"]["template"]["spec"]["containers"]]
    for image in images:
        if not image.startswith("agentloop:"):
            name, _, tag = image.rpartition(":")
            assert name and tag and tag != "latest", f"{image} is not pinned to a version"


def test_every_temporal_server_we_ship_or_start_refuses_an_update_near_the_blob_limit_at_admission() -> None:
    """One value of ``history.maxInFlightUpdatePayloads``, below the 2 MB blob
    limit: the servers agentloop starts (``DevServer``: ``agentloop dev``,
    ``run``'s embedded server, the test suite's), compose's dynamic config,
    and the Helm values the Kubernetes config points at."""
    from agentloop.workers.devserver import UPDATE_ADMISSION, DevServer

    key = "history.maxInFlightUpdatePayloads"
    started = int(DevServer().dynamic_config[key])
    assert started == int(UPDATE_ADMISSION[key]) and 1_000_000 < started < 2 * 1024 * 1024
    compose_config = yaml.safe_load((DEPLOY / "temporal-dynamicconfig.yaml").read_text())
    helm = yaml.safe_load((DEPLOY / "temporal-helm-values.yaml").read_text())["server"]["dynamicConfig"]
    assert compose_config[key] == helm[key] == [{"value": started, "constraints": {}}]
    assert "deploy/temporal-helm-values.yaml" in (KUBERNETES / "config.yaml").read_text()
    mounted = compose()["services"]["temporal"]["volumes"]
    assert any(v.startswith("./temporal-dynamicconfig.yaml:") for v in mounted), mounted


def test_every_temporal_server_we_ship_or_start_dispatches_by_priority_and_fairness() -> None:
    """The same fairness keys on: the servers agentloop starts (``agentloop
    dev``, ``run``'s embedded server, the test suite's), compose's dynamic
    config and the Helm values."""
    from agentloop.workers.devserver import FAIRNESS, DevServer

    started = DevServer().dynamic_config
    compose_config = yaml.safe_load((DEPLOY / "temporal-dynamicconfig.yaml").read_text())
    helm = yaml.safe_load((DEPLOY / "temporal-helm-values.yaml").read_text())["server"]["dynamicConfig"]
    assert set(FAIRNESS) == {"matching.useNewMatcher", "matching.enableFairness"}
    for key, value in FAIRNESS.items():
        assert started[key] == value == "true"
        assert compose_config[key] == helm[key] == [{"value": True, "constraints": {}}], key
    assert "matching.enableFairness" in (KUBERNETES / "config.yaml").read_text()
