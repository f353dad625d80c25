"""The deployment files in deploy/ (docs/deployment.md) against the code they deploy: the flags
they give `facefuse serve` exist and make valid settings, the probes ask routes the app serves,
and the images install what README.md installs."""

from __future__ import annotations

import json
import os
import re
from urllib.parse import urlsplit

import pytest
import yaml
from aiohttp.test_utils import make_mocked_request

from signaling.app import create_app
from signaling.cli import ENV_PREFIX, build_parsers, settings_from_args
from support.deploy_files import (
    COMPOSE,
    DEPLOY,
    DOCKERFILES,
    KUBERNETES,
    caddy_sites,
    compose,
    compose_nodes,
    dockerfile_env,
    dockerfile_pip_installs,
    env_names,
    exec_form,
    facefuse_containers,
    image_path,
    instructions,
    manifests,
    pip_installs,
    port_range,
    published_udp_range,
    readme_section,
    serve_flags,
    workload,
)
from support.photos import REPO_ROOT
from support.server import loopback_settings

ADMIN_KEY = "k" * 32
PUBLIC_IP = "203.0.113.7"  # TEST-NET-3: a documentation address
HOST_IP = "10.0.0.5"
# The values the compose file and the manifests take from the operator, for the settings checks.
REDIS_PASSWORD = "r" * 32
COMPOSE_VARIABLES = {
    "FACEFUSE_DOMAIN": "facefuse.example.com",
    "FACEFUSE_PUBLIC_IP": PUBLIC_IP,
    "FACEFUSE_REDIS_PASSWORD": REDIS_PASSWORD,
}
SECRET_VALUES = {"admin-key": ADMIN_KEY, "redis-url": f"redis://:{REDIS_PASSWORD}@redis:6379/0"}
FIELD_VALUES = {"status.hostIP": HOST_IP, "metadata.name": "facefuse-0"}


def serve_options() -> set[str]:
    """Every option `facefuse serve` takes, read from the CLI's own parser (argparse has no public
    list of them: `_actions` is the one place)."""
    _, serve = build_parsers()
    return {option for action in serve._actions for option in action.option_strings}


def flag_env_names() -> set[str]:
    """FACEFUSE_* names the CLI reads: one per flag (signaling/cli.py's _env_name)."""
    return {ENV_PREFIX + option.lstrip("-").replace("-", "_").upper() for option in serve_options()}


def all_deploy_arguments() -> dict[str, list[str]]:
    """Where each `facefuse serve` argument list is: compose services, manifests, Dockerfiles."""
    found = {f"compose {name}": service["command"] for name, service in compose_nodes().items()}
    found |= {f"kubernetes {c['name']}": c.get("args", []) for c in facefuse_containers()}
    found |= {
        f"{path.name} ENTRYPOINT+CMD": exec_form(path, "ENTRYPOINT")[2:] + exec_form(path, "CMD")
        for path in DOCKERFILES.values()
    }
    return found


def all_deploy_env_names() -> dict[str, list[str]]:
    found = {f"compose {name}": env_names(service.get("environment", {})) for name, service in compose_nodes().items()}
    found |= {f"kubernetes {c['name']}": env_names(c.get("env", [])) for c in facefuse_containers()}
    found |= {path.name: list(dockerfile_env(path)) for path in DOCKERFILES.values()}
    return found


def test_every_yaml_and_json_file_in_deploy_parses():
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yml", ".yaml", ".json"))
    assert COMPOSE in files and len([p for p in files if p.parent == KUBERNETES]) >= 4
    for path in files:
        if path.suffix == ".json":
            json.loads(path.read_text())
        else:
            assert any(doc is not None for doc in yaml.safe_load_all(path.read_text())), f"{path}: no document"


def test_the_serve_flags_in_the_deploy_files_exist_in_the_cli():
    options = serve_options()
    arguments = all_deploy_arguments()
    assert "--redis-url" in serve_flags(arguments["compose node-a"])  # the reading finds them at all
    assert "--ice-host" in serve_flags(arguments["kubernetes facefuse"])
    assert "--drain-timeout" in serve_flags(arguments["compose node-b"])
    unknown = {where: sorted(set(serve_flags(args)) - options) for where, args in arguments.items()}
    assert not any(unknown.values()), f"flags `facefuse serve` does not take: {unknown}"


def test_the_facefuse_variables_in_the_deploy_files_name_flags():
    """A misspelt FACEFUSE_* variable is silently ignored by the server: each must be a flag's."""
    known = flag_env_names()
    assert "FACEFUSE_ADMIN_KEY" in known  # --admin-key's: the key itself, read from the environment
    names = all_deploy_env_names()
    assert "FACEFUSE_REDIS_URL" in names["kubernetes facefuse"]
    unknown = {
        where: sorted(n for n in found if n.startswith(ENV_PREFIX) and n not in known) for where, found in names.items()
    }
    assert not any(unknown.values()), f"variables no flag reads: {unknown}"


def _clear_facefuse_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)


def _interpolated(text: str, variables: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:?message} and ${NAME:-default}, and Kubernetes' $(NAME)."""
    text = re.sub(r"\$\{(\w+)(?::[?-][^}]*)?\}", lambda m: variables[m[1]], text)
    return re.sub(r"\$\((\w+)\)", lambda m: variables[m[1]], text)


@pytest.mark.parametrize("node", ["node-a", "node-b"])
def test_each_compose_node_gets_valid_settings_with_an_admin_key_on_every_address(node, monkeypatch, tmp_path):
    _clear_facefuse_environment(monkeypatch)
    service = compose_nodes()[node]
    key_file = tmp_path / "admin_key"
    key_file.write_text(ADMIN_KEY + "\n")
    (secret,) = service["secrets"]
    arguments = [
        _interpolated(word, COMPOSE_VARIABLES).replace(f"/run/secrets/{secret}", str(key_file))
        for word in service["command"]
    ]
    image = next(
        path for path in DOCKERFILES.values() if str(path.relative_to(REPO_ROOT)) == service["build"]["dockerfile"]
    )
    for name, value in {**dockerfile_env(image), **service.get("environment", {})}.items():
        monkeypatch.setenv(name, _interpolated(str(value), COMPOSE_VARIABLES))
    _, serve = build_parsers()  # the environment is read as the parser is built
    settings = settings_from_args(serve.parse_args(arguments))

    assert settings.quota.admin_key == ADMIN_KEY and not settings.local_mode  # else it refuses 0.0.0.0
    assert settings.http.host == "0.0.0.0"
    assert settings.quota.redis_url == f"redis://:{REDIS_PASSWORD}@redis:6379/0"
    assert settings.quota.node_id == node  # one name each: the store's leases are per node
    assert settings.stream.ice.public_address == PUBLIC_IP
    domain = COMPOSE_VARIABLES["FACEFUSE_DOMAIN"]
    assert settings.cluster.advertise_url == f"https://{node}.{domain}"
    assert set(settings.http.public_hosts) == {domain, f"{node}.{domain}"}  # else 421 for its own names
    proxy_address = compose()["services"]["proxy"]["networks"]["default"]["ipv4_address"]
    assert settings.http.trusted_proxies == (f"{proxy_address}/32",)
    assert settings.stream.drain_timeout_s + 5 < _seconds(service["stop_grace_period"])  # docker kills at it


def _seconds(duration: str) -> float:
    """A compose duration such as "135s" or "2m"."""
    return float(duration[:-1]) * {"s": 1, "m": 60}[duration[-1]]


def _container_env(container: dict) -> dict[str, str]:
    env = {}
    for item in container["env"]:
        source = item.get("valueFrom", {})
        if "value" in item:
            env[item["name"]] = item["value"]
        elif "fieldRef" in source:
            env[item["name"]] = FIELD_VALUES[source["fieldRef"]["fieldPath"]]
        elif source["secretKeyRef"]["key"] in SECRET_VALUES:
            env[item["name"]] = SECRET_VALUES[source["secretKeyRef"]["key"]]
        else:
            assert source["secretKeyRef"].get("optional"), f"{item['name']}: a Secret key the docs do not name"
    return env


def test_the_kubernetes_node_gets_valid_settings_on_its_host_address(monkeypatch):
    _clear_facefuse_environment(monkeypatch)
    (container,) = facefuse_containers()
    env = _container_env(container)
    for name, value in {**dockerfile_env(DOCKERFILES["cuda"]), **env}.items():
        monkeypatch.setenv(name, value)
    _, serve = build_parsers()
    settings = settings_from_args(serve.parse_args([_interpolated(word, env) for word in container["args"]]))

    assert settings.quota.admin_key == ADMIN_KEY and not settings.local_mode
    assert settings.http.host == "0.0.0.0" and settings.pipeline.device == "cuda"
    assert settings.stream.ice.hosts == (HOST_IP,)  # the host's address: the pod has the host's network
    assert settings.quota.node_id == "facefuse-0"  # the StatefulSet's stable pod name
    assert settings.cluster.advertise_url == "https://facefuse-0.facefuse.example.com"
    assert "facefuse-0.facefuse.example.com" in settings.http.public_hosts


def test_each_kubernetes_node_is_reached_at_its_advertised_name_through_the_ingress():
    """A 307 sends a client to a node's --advertise-url, and the other nodes forward to it: the
    Ingress must route that name to that pod and no other."""
    (container,) = facefuse_containers()
    (advertised,) = [word.split("=", 1)[1] for word in container["args"] if word.startswith("--advertise-url=")]
    (ingress,) = [item for item in manifests() if item["kind"] == "Ingress"]
    routes = {rule["host"]: rule["http"]["paths"][0]["backend"]["service"]["name"] for rule in ingress["spec"]["rules"]}
    services = {item["metadata"]["name"]: item["spec"]["selector"] for item in manifests() if item["kind"] == "Service"}
    for replica in range(workload("facefuse")["spec"]["replicas"]):
        pod = f"facefuse-{replica}"
        host = urlsplit(_interpolated(advertised, {"FACEFUSE_NODE_ID": pod})).hostname
        assert host in routes, f"no Ingress rule for {host}"
        assert services[routes[host]] == {"statefulset.kubernetes.io/pod-name": pod}
        assert any(
            host in tls["hosts"] or f"*.{host.split('.', 1)[1]}" in tls["hosts"] for tls in ingress["spec"]["tls"]
        )


async def _router_serves(method: str, path: str) -> bool:
    app = create_app(loopback_settings())  # routes only: the chain starts with the app, not here
    match = await app.router.resolve(make_mocked_request(method, path, app=app))
    return match.http_exception is None


def probe_paths() -> dict[str, str]:
    """Each health check in the deploy files: where -> the path it asks."""
    (container,) = facefuse_containers()
    paths = {
        f"kubernetes {kind}": container[kind]["httpGet"]["path"]
        for kind in ("readinessProbe", "livenessProbe", "startupProbe")
        if kind in container
    }
    for path in DOCKERFILES.values():
        (check,) = [text for name, text in instructions(path) if name == "HEALTHCHECK"]
        paths[f"{path.name} HEALTHCHECK"] = re.search(r"http://127\.0\.0\.1:%s(/\w+)", check)[1]
    return paths


async def test_the_probes_ask_the_routes_meant_for_them_and_the_app_serves_them():
    paths = probe_paths()
    # readiness: /healthz (503 when this node cannot take sessions); liveness: /livez (503 only when
    # the worker stopped: a Redis blip must not restart every node). docs/running.md#health-checks
    assert paths["kubernetes readinessProbe"] == "/healthz"  # as Caddy's health checks (below)
    assert paths["kubernetes livenessProbe"] == "/livez"
    assert paths["Dockerfile HEALTHCHECK"] == paths["Dockerfile.cuda HEALTHCHECK"] == "/livez"
    unserved = {where: path for where, path in paths.items() if not await _router_serves("GET", path)}
    assert not unserved, f"probes of routes the app does not serve: {unserved}"


def test_the_prestop_hook_runs_a_file_the_image_holds():
    (container,) = facefuse_containers()
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    script = image_path(command[-1])
    assert script.is_file(), f"{command}: no such file in the repository (the images copy it to /app)"
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    assert not any(script.relative_to(REPO_ROOT).parts[0] == entry for entry in ignored), ".dockerignore leaves it out"


def test_the_kubernetes_grace_period_outlasts_the_drain():
    spec = workload("facefuse")["spec"]["template"]["spec"]
    (container,) = facefuse_containers()
    drain_s = float(_container_env(container)["FACEFUSE_DRAIN_TIMEOUT"])  # the server's and the preStop's
    # SIGTERM after the preStop: up to 3 s for requests in progress, 2 s for the quota store (docs/running.md)
    assert spec["terminationGracePeriodSeconds"] >= drain_s + 5 + 10


def test_the_kubernetes_node_has_a_gpu_and_the_hosts_network():
    spec = workload("facefuse")["spec"]["template"]["spec"]
    (container,) = facefuse_containers()
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    # media: the host's own address and ports (no port-range setting in aioice; facefuse.yaml says why)
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    secrets = {
        item["valueFrom"]["secretKeyRef"]["key"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {})
    }
    assert {"admin-key", "redis-url"} <= secrets


def test_redis_asks_for_a_password_in_compose_and_kubernetes():
    """Whoever reaches Redis can rewrite balances and sign the nodes' hops (issue #35 item 8)."""
    redis = compose()["services"]["redis"]
    assert redis["command"][redis["command"].index("--requirepass") + 1].startswith("${FACEFUSE_REDIS_PASSWORD:?")
    assert redis["environment"]["REDISCLI_AUTH"] == "${FACEFUSE_REDIS_PASSWORD}"  # its health check's
    assert "ports" not in redis  # never published
    (container,) = workload("redis")["spec"]["template"]["spec"]["containers"]
    assert container["args"][container["args"].index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    keys = {item["name"]: item["valueFrom"]["secretKeyRef"]["key"] for item in container["env"]}
    assert keys == {"REDIS_PASSWORD": "redis-password", "REDISCLI_AUTH": "redis-password"}


def test_redis_keeps_its_data_in_compose_and_kubernetes():
    redis = compose()["services"]["redis"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    (container,) = workload("redis")["spec"]["template"]["spec"]["containers"]
    assert container["args"][container["args"].index("--appendonly") + 1] == "yes"
    assert {mount["mountPath"] for mount in container["volumeMounts"]} == {"/data"}


def test_each_compose_node_publishes_its_own_media_ports_one_for_one():
    """The node advertises the container's port at the host's address, so the host must forward
    that same port number to it; two nodes on one host must not share a port."""
    taken: set[int] = set()
    for name, service in compose_nodes().items():
        ports = port_range(service["sysctls"]["net.ipv4.ip_local_port_range"])
        (mapping,) = [m for m in service["ports"] if m.endswith("/udp")]
        host, container = published_udp_range(mapping)
        assert host == container == ports, f"{name}: publishes {mapping} for ephemeral ports {ports}"
        assert not taken & set(ports), f"{name}: its range overlaps another node's"
        taken |= set(ports)
        assert not any(m for m in service.get("ports", []) if not m.endswith("/udp")), (
            f"{name}: HTTP goes through the proxy"
        )


def test_the_proxy_sends_http_to_every_compose_node_and_each_nodes_own_name_to_it(tmp_path):
    domain = COMPOSE_VARIABLES["FACEFUSE_DOMAIN"]
    sites = caddy_sites(domain, tmp_path)
    nodes = compose_nodes()
    service_site = sites.pop(domain)
    assert sorted(u["dial"] for u in service_site["upstreams"]) == sorted(f"{name}:8080" for name in nodes)
    assert service_site["health_checks"]["active"]["uri"] == "/healthz"
    proxy_address = compose()["services"]["proxy"]["networks"]["default"]["ipv4_address"]
    for name, service in nodes.items():
        advertised = urlsplit(
            _interpolated(service["environment"]["FACEFUSE_ADVERTISE_URL"], COMPOSE_VARIABLES)
        ).hostname
        assert [u["dial"] for u in sites.pop(advertised)["upstreams"]] == [f"{name}:8080"], (
            f"{name}: its --advertise-url does not reach it"
        )
        # the other nodes forward to that name: it must lead to the proxy on the compose network
        assert f"{advertised}:{proxy_address}" in [_interpolated(h, COMPOSE_VARIABLES) for h in service["extra_hosts"]]
    assert not sites, f"sites for no node: {sites}"
    proxy = compose()["services"]["proxy"]
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    assert {"80:80", "443:443"} <= set(proxy["ports"])


def test_the_images_install_what_the_readme_installs():
    first_command = pip_installs(readme_section("Two commands"))
    before = pip_installs(readme_section("Before you install"))
    cpu_torch = {args for args in before if "--index-url" in args}
    gpu_extra = {args for args in before if any("[gpu]" in word for word in args)}
    assert len(first_command) == 2 and len(cpu_torch) == 1 and len(gpu_extra) == 1, (first_command, before)

    assert dockerfile_pip_installs(DOCKERFILES["cpu"]) == first_command | cpu_torch
    editable = {args for args in first_command if "-e" in args}
    assert dockerfile_pip_installs(DOCKERFILES["cuda"]) == (first_command - editable) | gpu_extra


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_each_image_runs_facefuse_serve_as_a_user_on_a_python_the_readme_allows(kind):
    path = DOCKERFILES[kind]
    steps = instructions(path)
    base = next(text for name, text in steps if name == "FROM")
    if kind == "cpu":
        assert re.fullmatch(r"python:3\.1[12][-.\w]*", base), base  # README: Python 3.11 or 3.12
    else:
        # CUDA 13 (torch 2.13.0's wheel, cupy-cuda13x); Ubuntu 24.04's python3 is 3.12
        assert re.fullmatch(r"nvidia/cuda:13\.[\d.]+-runtime-ubuntu24\.04", base), base
    assert exec_form(path, "ENTRYPOINT") == ["facefuse", "serve"]
    users = [text for name, text in steps if name == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert [text for name, text in steps if name == "EXPOSE"] == [dockerfile_env(path)["FACEFUSE_PORT"]]


def test_the_build_context_leaves_out_the_venv_and_the_tests_caches():
    ignored = set((REPO_ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".git", ".pytest_cache", "tests"} <= ignored
    # what the images install from must stay in
    needed = {"pyproject.toml", "README.md", "requirements-weights.txt", "static", "signaling", "deploy"}
    assert not needed & ignored
