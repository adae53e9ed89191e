#!/usr/bin/env python3
"""The shape of the central service and the gateway recipes, as scripts/test-image renders
them: what SPEC "Kubernetes: the central service" asks of overlays/central, the Istio and
Contour objects against their documented fields (no package ships their CRD schemas for this
check), the descriptors each gateway sends against the YAML tree they are meant for, and the
bundled alerts against the job the ServiceMonitor produces.

Usage: test-image-central.py WORK REPO (WORK holds central.yaml, monitoring.yaml, sidecar.yaml,
daemonset.yaml and gateway-*.yaml; $SLUICED is the daemon). Prints `ok    NAME` or
`FAIL  NAME` per check."""

import os
import re
import shutil
import subprocess
import sys
import tomllib

import yaml

work, repo = sys.argv[1], sys.argv[2]
results = []


def test(name, fn):
    try:
        fn()
        results.append((True, name, ""))
    except Exception as e:  # a test's failure, named
        results.append((False, name, f"{type(e).__name__}: {e}"))


def load(name):
    with open(f"{work}/{name}.yaml") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


central = load("central")
deployment = one(central, "Deployment")
template = deployment["spec"]["template"]
pod_labels = template["metadata"]["labels"]
container = [c for c in template["spec"]["containers"] if c["name"] == "sluiced"][0]
config_text = one(central, "ConfigMap", "sluice-config")["data"]["sluice.toml"]
config = tomllib.loads(config_text)


def deployment_shape():
    assert deployment["spec"]["replicas"] >= 2
    assert config["backend"]["kind"] == "redis" and "url" not in config["backend"]
    url = [e for e in container["env"] if e["name"] == "SLUICE_BACKEND__URL"][0]
    assert url["valueFrom"]["secretKeyRef"] == {"name": "sluice-redis", "key": "url"}, url
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"], "the HPA scales on the CPU request"
    spread = template["spec"]["topologySpreadConstraints"]
    hosts = [t for t in spread if t["topologyKey"] == "kubernetes.io/hostname"]
    assert hosts and selects(hosts[0]["labelSelector"]["matchLabels"], pod_labels), spread


test("central: >= 2 replicas on Redis (URL from the Secret), hardened, spread across nodes", deployment_shape)


def service_shape():
    svc = one(central, "Service", "sluice")
    assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert {n: p["port"] for n, p in ports.items()} == {"grpc": 8081, "http": 8080, "sluice-metrics": 9464}, ports
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    for p in ports.values():
        assert named[p["targetPort"]] == p["port"], p
    assert selects(svc["spec"]["selector"], pod_labels)
    listen = config["listen"]
    assert listen["grpc"].endswith(":8081") and listen["http"].endswith(":8080") and listen["metrics"].endswith(":9464")


test("central: ClusterIP Service sluice, grpc 8081, http 8080, metrics 9464, on the pods' ports", service_shape)


def disruption_and_scaling():
    pdb = one(central, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and selects(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    hpa = one(central, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", deployment["metadata"]["name"]), ref
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]


test("central: PodDisruptionBudget minAvailable 1, HorizontalPodAutoscaler on CPU", disruption_and_scaling)


def listener_tls():
    tls = config["listen"]["tls"]
    volume = [v for v in template["spec"]["volumes"] if "secret" in v][0]
    assert {i["key"] for i in volume["secret"]["items"]} == {"tls.crt", "tls.key", "ca.crt"}, volume
    mount = [m for m in container["volumeMounts"] if m["name"] == volume["name"]][0]["mountPath"]
    assert tls["cert_file"] == f"{mount}/tls.crt" and tls["key_file"] == f"{mount}/tls.key", tls
    with open(f"{repo}/deploy/kubernetes/overlays/central/certificate.yaml") as f:
        cert = yaml.safe_load(f)
    assert cert["spec"]["secretName"] == volume["secret"]["secretName"]
    assert "sluice.sluice.svc" in cert["spec"]["dnsNames"]


test("central: listener TLS from cert-manager's Secret (tls.crt, tls.key, ca.crt)", listener_tls)


def network_policy():
    np = one(central, "NetworkPolicy")
    assert selects(np["spec"]["podSelector"]["matchLabels"], pod_labels)
    admitted = {}
    for rule in np["spec"]["ingress"]:
        for peer in rule["from"]:
            for port in rule["ports"]:
                admitted.setdefault(port["port"], []).append(peer["namespaceSelector"]["matchLabels"])
    assert {"grpc", "sluice-metrics"} <= set(admitted), admitted
    assert {"kubernetes.io/metadata.name": "monitoring"} in admitted["sluice-metrics"], admitted
    assert admitted["grpc"] != admitted["sluice-metrics"], "the gateway and Prometheus apart"


test("central: a NetworkPolicy admitting the gateways (gRPC, HTTP) and Prometheus (metrics)", network_policy)


def central_check_config():
    # The pod's files in a temp dir: the YAML of the ConfigMap, throwaway TLS files.
    root = f"{work}/central-root"
    shutil.rmtree(root, ignore_errors=True)
    yaml_dir = f"{root}/ratelimit"
    os.makedirs(yaml_dir)
    for name, text in one(central, "ConfigMap", "sluice-ratelimit")["data"].items():
        with open(f"{yaml_dir}/{name}", "w") as f:
            f.write(text)
    text = config_text.replace(config["rls"]["envoy_config"], yaml_dir)
    tls_dir = os.path.dirname(config["listen"]["tls"]["cert_file"])
    text = text.replace(tls_dir, work)
    path = f"{root}/sluice.toml"
    with open(path, "w") as f:
        f.write(text)
    env = {**os.environ, "SLUICE_BACKEND__URL": "redis://:secret@127.0.0.1:6379"}
    run = subprocess.run([os.environ["SLUICED"], "--check-config", path], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr


test("central: sluiced --check-config accepts its config and its envoyproxy/ratelimit YAML", central_check_config)


def job_of_every_service():
    sm = one(load("monitoring"), "ServiceMonitor")
    label = sm["spec"]["jobLabel"]
    jobs = set()
    for docs, name in ((central, "sluice"), (load("sidecar"), "sluice-metrics"), (load("daemonset"), "sluice-metrics")):
        svc = one(docs, "Service", name)
        labels = svc["metadata"]["labels"]
        assert selects(sm["spec"]["selector"]["matchLabels"], labels), name
        assert any(p["name"] == e["port"] for p in svc["spec"]["ports"] for e in sm["spec"]["endpoints"])
        jobs.add(labels[label])
    assert jobs == {"sluice"}, jobs
    # Every job matcher of the bundled alerts selects that job.
    matchers = []
    for rules in os.listdir(f"{repo}/alerts"):
        if not rules.endswith(".rules.yml"):
            continue
        with open(f"{repo}/alerts/{rules}") as f:
            for group in yaml.safe_load(f)["groups"]:
                for rule in group["rules"]:
                    matchers += re.findall(r'job\s*(=~|=|!=|!~)\s*"([^"]*)"', rule.get("expr", ""))
    assert matchers, "no alert names a job"
    for op, value in matchers:
        matched = re.fullmatch(value, "sluice") is not None if "~" in op else value == "sluice"
        assert matched == (not op.startswith("!")), (op, value)


test("ServiceMonitor jobLabel: every Service's job is `sluice`, which the bundled alerts select", job_of_every_service)

# The descriptor keys the YAML tree of the example (and the central overlay) is written for.
with open(f"{repo}/deploy/kubernetes/overlays/central/ratelimit/edge.yaml") as f:
    edge = yaml.safe_load(f)
TREE = ["remote_address", "path", "tenant"]


def tree_keys():
    level, keys = edge["descriptors"], []
    while level:
        node = level[0]
        keys.append(node["key"])
        level = node.get("descriptors")
    assert keys == TREE, keys


test("the central overlay's YAML is the three-level tree the gateways send", tree_keys)

ISTIO_APPLY = {"HTTP_FILTER", "VIRTUAL_HOST", "HTTP_ROUTE", "CLUSTER", "LISTENER", "NETWORK_FILTER", "ROUTE_CONFIGURATION"}
ISTIO_OPS = {"MERGE", "ADD", "REMOVE", "INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "REPLACE"}
SERVICE = "sluice.sluice.svc.cluster.local"


def istio():
    docs = load("gateway-istio")
    filters = [d for d in docs if d["kind"] == "EnvoyFilter"]
    assert len(filters) == 2
    for f in filters:
        assert f["apiVersion"] == "networking.istio.io/v1alpha3"
        assert set(f["spec"]) <= {"workloadSelector", "configPatches", "priority", "targetRefs"}
        for patch in f["spec"]["configPatches"]:
            assert patch["applyTo"] in ISTIO_APPLY and patch["patch"]["operation"] in ISTIO_OPS, patch
            assert patch["match"]["context"] in ("GATEWAY", "SIDECAR_INBOUND", "SIDECAR_OUTBOUND", "ANY")
    value = [p["patch"]["value"] for f in filters for p in f["spec"]["configPatches"] if p["applyTo"] == "HTTP_FILTER"][0]
    config = value["typed_config"]
    assert config["@type"].endswith("envoy.extensions.filters.http.ratelimit.v3.RateLimit")
    assert config["domain"] == edge["domain"]
    assert config["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"] == f"outbound|8081||{SERVICE}"
    actions = [p["patch"]["value"] for f in filters for p in f["spec"]["configPatches"] if p["applyTo"] == "VIRTUAL_HOST"][0]
    sent = [[("remote_address" if "remote_address" in a else a["request_headers"]["descriptor_key"]) for a in r["actions"]]
            for r in actions["rate_limits"]]
    assert sent == [TREE[:1], TREE[:2], TREE], sent
    rule = one(docs, "DestinationRule")
    assert rule["spec"]["host"] == SERVICE
    assert rule["spec"]["trafficPolicy"]["portLevelSettings"][0]["tls"]["mode"] == "SIMPLE"


test("istio: EnvoyFilters (documented fields) adding the ratelimit filter to the gateway, the tree's descriptors, TLS to sluiced", istio)


def contour():
    docs = load("gateway-contour")
    ext = one(docs, "ExtensionService")
    assert ext["apiVersion"] == "projectcontour.io/v1alpha1"
    assert set(ext["spec"]) <= {"services", "protocol", "protocolVersion", "validation", "loadBalancerPolicy", "timeoutPolicy", "circuitBreakerPolicy"}
    assert ext["spec"]["protocol"] == "h2" and ext["spec"]["services"] == [{"name": "sluice", "port": 8081}]
    assert set(ext["spec"]["validation"]) <= {"caSecret", "subjectName", "subjectNames"}
    proxy = one(docs, "HTTPProxy")
    descriptors = proxy["spec"]["virtualhost"]["rateLimitPolicy"]["global"]["descriptors"]
    entry_kinds = {"genericKey", "requestHeader", "requestHeaderValueMatch", "remoteAddress"}
    sent = []
    for d in descriptors:
        keys = []
        for e in d["entries"]:
            (kind,) = e.keys()
            assert kind in entry_kinds, kind
            keys.append("remote_address" if kind == "remoteAddress" else e[kind]["descriptorKey"])
        sent.append(keys)
    assert sent == [TREE[:1], TREE[:2], TREE], sent
    with open(f"{repo}/deploy/gateways/contour/contour.yaml") as f:
        contour_config = yaml.safe_load(f)["rateLimitService"]
    assert contour_config["extensionService"] == f"{ext['metadata']['namespace']}/{ext['metadata']['name']}"
    assert contour_config["domain"] == edge["domain"]


test("contour: ExtensionService and HTTPProxy (documented fields), the tree's descriptors, Contour pointed at it", contour)

for ok, name, why in results:
    print(("ok    " if ok else "FAIL  ") + name)
    if not ok:
        print("      " + why)
