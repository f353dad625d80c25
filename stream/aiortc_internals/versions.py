"""The aiortc and aioice versions whose internals this package was written against."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import metadata

EXPECTED_VERSIONS: Mapping[str, str] = {"aiortc": "1.16.0", "aioice": "0.13.0"}


def installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def version_mismatch(installed: Callable[[str], str | None] = installed_version) -> str | None:
    """A message naming the expected and the installed version of each package, or None when
    every installed version is the expected one."""
    found = {package: installed(package) for package in EXPECTED_VERSIONS}
    if all(found[package] == expected for package, expected in EXPECTED_VERSIONS.items()):
        return None
    expected = ", ".join(f"{package}=={version}" for package, version in EXPECTED_VERSIONS.items())
    actual = ", ".join(f"{package} {version or 'not installed'}" for package, version in found.items())
    return (
        f"stream.aiortc_internals was written for {expected}, but {actual} is installed: its "
        "changes reach into private attributes that other versions may lack or use differently. "
        "Install the pinned versions (pyproject.toml), or review each change this package lists "
        "against the new versions and update EXPECTED_VERSIONS."
    )


def check_installed_versions(installed: Callable[[str], str | None] = installed_version) -> None:
    """Raises ImportError unless the installed aiortc and aioice are the expected versions."""
    message = version_mismatch(installed)
    if message is not None:
        raise ImportError(message)
