"""Which packages a source tree imports, read from its syntax: for tests of the layering."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def imports_of(package_dir: Path, top_level: str) -> list[str]:
    """'file: module' for each absolute import of `top_level` (or anything under it) in the
    package's sources, the file named from the repository's root."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            name = path.relative_to(REPO)
            found += [f"{name}: {module}" for module in modules if module.split(".")[0] == top_level]
    return found
