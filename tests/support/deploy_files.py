"""Reading the deployment files in deploy/ for the tests: the compose file, the Kubernetes
manifests, the Dockerfiles' instructions, and the pip commands of the README and the images."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from support.photos import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
CADDYFILE = DEPLOY / "Caddyfile"
KUBERNETES = DEPLOY / "kubernetes"
DOCKERFILES = {"cpu": DEPLOY / "Dockerfile", "cuda": DEPLOY / "Dockerfile.cuda"}
# Where the images copy the repository (WORKDIR, then COPY . .).
IMAGE_ROOT = "/app"


def caddy_sites(domain: str, scratch: Path) -> dict[str, dict[str, Any]]:
    """The Caddyfile as Caddy itself reads it (`caddy adapt --validate`, with FACEFUSE_DOMAIN set):
    each site's name -> its reverse_proxy handler. `scratch` is Caddy's home for the run."""
    caddy = shutil.which("caddy")
    assert caddy, "caddy is not installed (apt-get install caddy; tests/run.sh installs it)"
    env = {"PATH": os.environ["PATH"], "HOME": str(scratch), "XDG_DATA_HOME": str(scratch), "FACEFUSE_DOMAIN": domain}
    done = subprocess.run(
        [caddy, "adapt", "--config", str(CADDYFILE), "--adapter", "caddyfile", "--validate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    sites = {}
    for server in json.loads(done.stdout)["apps"]["http"]["servers"].values():
        for route in server["routes"]:
            (host,) = route["match"][0]["host"]
            (handler,) = [
                h for r in route["handle"][0]["routes"] for h in r["handle"] if h["handler"] == "reverse_proxy"
            ]
            sites[host] = handler
    return sites


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def compose_nodes() -> dict[str, dict[str, Any]]:
    """The compose file's facefuse services: those built from this repository."""
    return {name: service for name, service in compose()["services"].items() if "build" in service}


def manifests() -> list[dict[str, Any]]:
    """Every object of every manifest in deploy/kubernetes/."""
    objects = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        objects += [item for item in yaml.safe_load_all(path.read_text()) if item]
    return objects


def facefuse_containers() -> list[dict[str, Any]]:
    """The containers that run the facefuse image, from the manifests' workloads."""
    containers = []
    for item in manifests():
        if item["kind"] in ("Deployment", "StatefulSet"):
            containers += [c for c in item["spec"]["template"]["spec"]["containers"] if "facefuse" in c["image"]]
    return containers


def workload(name: str) -> dict[str, Any]:
    return next(
        item
        for item in manifests()
        if item["kind"] in ("Deployment", "StatefulSet") and item["metadata"]["name"] == name
    )


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, its text) for each instruction, continuation lines joined, comments left out."""
    joined: list[str] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        if line.strip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if pending or line.strip():
            joined.append(pending + line)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip()) for text in joined]


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, text in instructions(dockerfile):
        if name == "ENV":
            env.update(word.split("=", 1) for word in shlex.split(text))
    return env


def exec_form(dockerfile: Path, instruction: str) -> list[str]:
    """An instruction written in exec form (a JSON array), e.g. ENTRYPOINT; [] when absent."""
    texts = [text for name, text in instructions(dockerfile) if name == instruction]
    return json.loads(texts[-1]) if texts else []


_PIP_INSTALL = re.compile(r"(?:^|[\s/`])pip install ([^`&\n]+)")


def pip_installs(text: str) -> set[tuple[str, ...]]:
    """The arguments of every `pip install` in `text` (a shell line, a README section)."""
    return {tuple(shlex.split(found.strip())) for found in _PIP_INSTALL.findall(text)}


def dockerfile_pip_installs(dockerfile: Path) -> set[tuple[str, ...]]:
    return set().union(*(pip_installs(text) for name, text in instructions(dockerfile) if name == "RUN"))


def readme_section(title: str) -> str:
    """The text of README.md's `## title` section."""
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def serve_flags(arguments: list[str]) -> list[str]:
    """The --flags in a `facefuse serve` argument list (`--flag=value` or `--flag value`)."""
    return [word.split("=", 1)[0] for word in arguments if word.startswith("--")]


def env_names(environment: dict[str, Any] | list[dict[str, Any]]) -> list[str]:
    """Variable names from a compose `environment` mapping or a container's `env` list."""
    if isinstance(environment, dict):
        return list(environment)
    return [item["name"] for item in environment]


def image_path(path: str) -> Path:
    """The repository file an image path stands for (the images copy the repository to /app)."""
    assert path.startswith(IMAGE_ROOT + "/"), path
    return REPO_ROOT / path.removeprefix(IMAGE_ROOT + "/")


def port_range(sysctl_value: str) -> range:
    low, high = (int(port) for port in sysctl_value.split())
    return range(low, high + 1)


def published_udp_range(mapping: str) -> tuple[range, range]:
    """('HOST_LOW-HOST_HIGH', 'CONTAINER_LOW-CONTAINER_HIGH') ranges of a compose "H1-H2:C1-C2/udp"."""
    ports, _, protocol = mapping.partition("/")
    assert protocol == "udp", mapping
    host, container = ports.rsplit(":", 1)
    return tuple(range(int(a), int(b) + 1) for a, b in (part.split("-") for part in (host, container)))  # type: ignore[return-value]
