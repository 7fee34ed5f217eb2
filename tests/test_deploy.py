"""deploy/ is valid as written: compose files against the Compose Specification's schema
(check-jsonschema's vendored copy), Kubernetes manifests against the Kubernetes API schemas
(kubernetes-validate, strict: unknown fields fail), the OpenTelemetry Collector configs
wired (every pipeline component defined, the load balancer routing by trace id to the
collectors that exist), and `docker compose config` where docker compose is installed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
COMPOSE_FILES = [DEPLOY / "docker-compose.yml", DEPLOY / "lake" / "docker-compose.yml"]
K8S_FILES = sorted((DEPLOY / "k8s").glob("*.yaml"))
ENV = {"TRACEFIX_TOKEN": "t", "TRACEFIX_INGEST_TOKEN": "i", "POSTGRES_PASSWORD": "p"}


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_compose_files_follow_the_compose_specification(path):
    pytest.importorskip("check_jsonschema")
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                           str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_docker_compose_config_accepts_them(path):
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("docker compose is not installed here")
    done = subprocess.run([docker, "compose", "-f", str(path), "config", "--quiet"], capture_output=True, text=True,
                          env={**ENV, "PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", K8S_FILES, ids=lambda p: p.name)
def test_kubernetes_manifests_validate_strictly(path):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = kubernetes_validate.utils.latest_version()
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises on an invalid or unknown field


def _check_otel_config(config: dict) -> dict:
    """Every component a pipeline names is defined; returns the load-balancing exporter."""
    for name, pipeline in config["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"pipeline {name} names undefined {kind[:-1]} {component}"
    lb = config["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID"  # a trace's spans, and its retries, go to one collector
    assert "${env:TRACEFIX_INGEST_TOKEN}" in lb["protocol"]["otlp"]["headers"]["authorization"]
    return lb


def test_compose_balancer_routes_by_trace_id_to_every_lake_collector():
    from tracefix.collector.store.lake import catalog_conninfo, is_lake

    compose = yaml.safe_load((DEPLOY / "lake" / "docker-compose.yml").read_text())
    lb = _check_otel_config(yaml.safe_load((DEPLOY / "lake" / "otel-collector.yaml").read_text()))
    collectors = {name for name, svc in compose["services"].items()
                  if "TRACEFIX_STORE" in (svc.get("environment") or {}) and "entrypoint" not in svc}
    assert len(collectors) >= 2
    assert {h.split(":")[0] for h in lb["resolver"]["static"]["hostnames"]} == collectors
    spools = [v for name in collectors for v in compose["services"][name]["volumes"] if v.endswith(":/data")]
    assert len(set(spools)) == len(collectors)  # a spool of its own each, never shared
    store = compose["services"]["tracefix-1"]["environment"]["TRACEFIX_STORE"]
    assert is_lake(store) and "host=postgres" in catalog_conninfo(store)
    assert compose["services"]["compactor"]["entrypoint"] == ["tracefix", "store", "compact"]


def test_kubernetes_balancer_resolves_the_headless_service_of_the_lake_collectors():
    docs = {(d["kind"], d["metadata"]["name"]): d
            for d in yaml.safe_load_all((DEPLOY / "k8s" / "tracefix-lake.yaml").read_text()) if d}
    lb = _check_otel_config(yaml.safe_load(docs[("ConfigMap", "tracefix-otel-collector")]["data"]["config.yaml"]))
    headless = docs[("Service", lb["resolver"]["dns"]["hostname"])]
    assert headless["spec"]["clusterIP"] == "None"
    pods = docs[("StatefulSet", "tracefix-lake")]  # each pod keeps its own spool volume
    assert headless["spec"]["selector"] == pods["spec"]["selector"]["matchLabels"]
    assert pods["spec"]["replicas"] > 1
    env = {e["name"]: e.get("value") for e in pods["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TRACEFIX_STORE"].startswith("ducklake:postgres:")
    assert [t["metadata"]["name"] for t in pods["spec"]["volumeClaimTemplates"]] == ["data"]


def _replays(args) -> bool:
    """Whether a container's arguments make it a replay worker (it runs agent code)."""
    return "--allow-module" in (args or []) or "--allow-entrypoint" in (args or [])


def test_the_replay_key_goes_to_the_replay_workers_and_never_to_a_collector():
    """The app signs what it records with TRACEFIX_REPLAY_KEY and a replay worker checks it
    (tracefix.replay_signing): every replay worker gets it, from a secret of its own in
    Kubernetes, and no collector or diagnosis worker does."""
    workers = 0
    for path in COMPOSE_FILES:
        for name, service in yaml.safe_load(path.read_text())["services"].items():
            env = service.get("environment") or {}
            if _replays(service.get("command")):
                workers += 1
                assert "TRACEFIX_REPLAY_KEY" in env, (path.name, name)
            else:
                assert "TRACEFIX_REPLAY_KEY" not in env, (path.name, name)
    for path in K8S_FILES:
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec") or {}
            spec = spec.get("jobTemplate", {}).get("spec", spec)  # a CronJob's pods
            for container in (spec.get("template", {}).get("spec") or {}).get("containers") or []:
                env = {e["name"]: e for e in container.get("env") or []}
                from_secrets = {s["secretRef"]["name"] for s in container.get("envFrom") or [] if "secretRef" in s}
                if _replays(container.get("args")):
                    workers += 1
                    assert env["TRACEFIX_REPLAY_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "tracefix-replay"
                else:
                    assert "TRACEFIX_REPLAY_KEY" not in env and "tracefix-replay" not in from_secrets, container["name"]
    assert workers == 4
