"""The contract between stream.aiortc_internals and the installed aiortc / aioice.

Each private or undocumented name the package lists (touched.py) must still exist; the package
must touch no private name it does not list; nothing else in the project may touch them; and the
package refuses to import under other versions than the ones it was written for.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aioice import Candidate, Connection
from aiortc import RTCPeerConnection
from aiortc.codecs.h264 import H264Encoder
from aiortc.codecs.vpx import Vp8Encoder
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtcrtpreceiver import RemoteStreamTrack

import stream.aiortc_internals as internals
from stream.aiortc_internals import TOUCHED, Touched
from stream.aiortc_internals.versions import EXPECTED_VERSIONS, check_installed_versions, version_mismatch

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(internals.__file__).parent
# Our own mark on aioice's Connection, not one of its attributes.
OWN_MARKS = ("_facefuse_",)
# A name-mangled private attribute: _Class__name.
MANGLED = re.compile(r"^_[A-Z]\w*__\w+$")


def resolve(dotted: str) -> Any:
    """A module, or a class given as module.Class."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        module, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(module), name)


@pytest.fixture
async def instances() -> AsyncIterator[dict[str, Callable[[], Any]]]:
    """An instance of each class whose instance attributes the package touches."""
    pc = RTCPeerConnection()
    transceiver = pc.addTransceiver("video")
    yield {
        "aiortc.rtcpeerconnection.RTCPeerConnection": lambda: pc,
        "aiortc.rtcrtpreceiver.RTCRtpReceiver": lambda: transceiver.receiver,
        "aiortc.rtcrtpreceiver.RemoteStreamTrack": lambda: RemoteStreamTrack(kind="video"),
        "aiortc.rtcrtpsender.RTCRtpSender": lambda: transceiver.sender,
        "aiortc.rtcrtptransceiver.RTCRtpTransceiver": lambda: transceiver,
        "aiortc.rtcicetransport.RTCIceGatherer": lambda: transceiver.receiver.transport.transport.iceGatherer,
        "aiortc.jitterbuffer.JitterBuffer": lambda: JitterBuffer(capacity=16),
        "aiortc.codecs.h264.H264Encoder": H264Encoder,
        "aiortc.codecs.vpx.Vp8Encoder": Vp8Encoder,
        "aioice.ice.Connection": lambda: Connection(ice_controlling=True),
        "aioice.candidate.Candidate": lambda: Candidate(
            foundation="1", component=1, transport="udp", priority=1, host="127.0.0.1", port=9, type="host"
        ),
    }
    await pc.close()


@pytest.mark.parametrize("touched", TOUCHED, ids=lambda t: f"{t.where}.{t.name}")
async def test_every_touched_name_exists_in_the_installed_packages(
    touched: Touched, instances: dict[str, Callable[[], Any]]
) -> None:
    owner = resolve(touched.where)
    if touched.kind in ("module", "class"):
        assert hasattr(owner, touched.name), f"{touched.where} has no {touched.name!r}"
    elif touched.kind == "instance":
        assert touched.where in instances, f"the contract test cannot make a {touched.where}: add one to instances()"
        instance = instances[touched.where]()
        assert hasattr(instance, touched.name), f"a {touched.where} has no {touched.name!r}"
    elif touched.kind == "assigned":
        assigns = re.search(rf"\.{touched.name} = ", inspect.getsource(owner))
        assert assigns, f"{touched.where} no longer sets .{touched.name}"
    else:
        pytest.fail(f"unknown kind {touched.kind!r}")


def private_names(source: str) -> set[str]:
    """Private names a source reads or writes as attributes, or names in strings (getattr)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            name = node.value
        else:
            continue
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            found.add(name)
    return found


def own_names(source: str) -> set[str]:
    """Names the source defines itself: functions, methods, module-level and self.* assignments."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def package_sources() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(PACKAGE.glob("*.py")) if path.name != "touched.py"}


def test_the_package_touches_no_private_name_it_does_not_list() -> None:
    listed = {t.name for t in TOUCHED}
    for name, source in package_sources().items():
        unlisted = private_names(source) - own_names(source) - listed
        unlisted = {n for n in unlisted if not n.startswith(OWN_MARKS)}
        assert not unlisted, f"stream/aiortc_internals/{name} touches {sorted(unlisted)}: list them in touched.py"


def test_private_hooks_the_package_overrides_are_listed() -> None:
    """A method of ours that overrides a private one of aiortc's is a change to its internals."""
    listed = {(t.where, t.name) for t in TOUCHED}
    for module_name in ("encoder", "jitter_buffer"):
        module = importlib.import_module(f"stream.aiortc_internals.{module_name}")
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
                continue
            for name, value in vars(cls).items():
                is_method = inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod))
                if not is_method or not name.startswith("_") or name.startswith("__"):
                    continue
                for base in cls.__mro__[1:]:
                    if base.__module__.startswith(("aiortc", "aioice")) and name in vars(base):
                        where = f"{base.__module__}.{base.__qualname__}"
                        overrides = f"{cls.__name__} overrides {where}.{name}"
                        assert (where, name) in listed, f"{overrides}: list it in touched.py"


def test_every_listed_name_is_used_by_the_package() -> None:
    """The list stays honest both ways: a patch removed takes its entry with it."""
    source = "\n".join(package_sources().values())
    unused = [f"{t.where}.{t.name}" for t in TOUCHED if not re.search(rf"\b{re.escape(t.name)}\b", source)]
    assert not unused, f"touched.py lists names the package no longer uses: {unused}"


def project_sources() -> list[Path]:
    """Every Python file of the project but the package and the tests."""
    paths = []
    for top in ("stream", "signaling", "pipeline", "quota", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if PACKAGE not in path.parents:
                paths.append(path)
    return paths


def test_nothing_outside_the_package_touches_aiortc_internals() -> None:
    private = {t.name for t in TOUCHED if t.name.startswith("_")}
    module_names = {(t.where, t.name) for t in TOUCHED if t.kind == "module"}
    offences = []
    for path in project_sources():
        tree = ast.parse(path.read_text())
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("aiortc", "aioice")):
                imported = [(node.module, alias.name) for alias in node.names]
                offences += [f"{where}: imports {'.'.join(name)}" for name in imported if name in module_names]
            elif isinstance(node, ast.Attribute):
                # self._x is a class's own attribute (asyncio.Queue's _queue in bounded_queues.py)
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                if not on_self and (node.attr in private or MANGLED.match(node.attr)):
                    offences.append(f"{where}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in private or MANGLED.match(node.value):
                    offences.append(f"{where}:{node.lineno}: {node.value!r}")
    assert not offences, "aiortc/aioice internals outside stream/aiortc_internals:\n" + "\n".join(offences)


def test_the_installed_versions_are_the_expected_ones() -> None:
    assert version_mismatch() is None
    check_installed_versions()  # what the package's import ran


@pytest.mark.parametrize(
    "installed",
    [
        {"aiortc": "1.17.0", "aioice": "0.13.0"},
        {"aiortc": "1.16.0", "aioice": "0.10.1"},
        {"aiortc": "1.16.0", "aioice": None},
    ],
)
def test_other_versions_are_refused_with_both_named(installed: dict[str, str | None]) -> None:
    with pytest.raises(ImportError) as refused:
        check_installed_versions(installed.get)
    message = str(refused.value)
    assert "aiortc==1.16.0" in message and "aioice==0.13.0" in message
    for package, version in installed.items():
        assert f"{package} {version or 'not installed'}" in message


def test_importing_the_package_under_another_aiortc_fails() -> None:
    # A fresh interpreter whose package metadata reports another aiortc version.
    script = (
        "import importlib.metadata as metadata\n"
        "real = metadata.version\n"
        "metadata.version = lambda name: '1.17.0' if name == 'aiortc' else real(name)\n"
        "import stream.aiortc_internals\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert "aiortc==1.16.0, aioice==0.13.0" in result.stderr
    assert "aiortc 1.17.0, aioice 0.13.0 is installed" in result.stderr
    assert set(EXPECTED_VERSIONS) == {"aiortc", "aioice"}
