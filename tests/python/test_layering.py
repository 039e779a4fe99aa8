"""The layers of ARCHITECTURE.md hold: a lower layer never imports a higher one.

The contracts live in ``[tool.importlinter]`` of ``pyproject.toml`` and are run here with the
venv's ``lint-imports``. When one is broken, the failure lists every offending *direct*
import (``importer → imported (l.N)``: the imported module is forbidden or leads to a
forbidden one), not just the shortest chain import-linter prints, so that each line to change
is named. A second test checks at run time what the contracts cannot see: importing
``heinfer.compiler`` must not load the extension module ``heinfer._native``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = ROOT / "python"


def _env() -> dict[str, str]:
    """The environment of a fresh interpreter that imports this tree's ``heinfer``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PYTHON_DIR), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return env


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def _expand(graph: grimp.ImportGraph, expressions: list[str], as_packages: bool) -> set[str]:
    """Module names of contract expressions (wildcards resolved, packages with descendants)."""
    out: set[str] = set()
    for expr in expressions:
        found = graph.find_matching_modules(expr) if "*" in expr else {expr} & graph.modules
        for name in found:
            out.add(name)
            if as_packages:
                out |= graph.find_descendants(name)
    return out


def _offending_imports(graph: grimp.ImportGraph, contract: dict) -> list[str]:
    """Every direct import by a source module that is, or leads to, a forbidden module."""
    as_packages = contract.get("as_packages", True)
    sources = _expand(graph, contract["source_modules"], as_packages)
    forbidden = _expand(graph, contract["forbidden_modules"], as_packages) - sources
    lines = []
    for importer in sorted(sources):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) - sources):
            target = next(
                (f for f in sorted(forbidden) if f == imported or graph.chain_exists(imported, f)),
                None,
            )
            if target is None:
                continue
            for detail in graph.get_import_details(importer=importer, imported=imported):
                via = "" if target == imported else f", reaching {target}"
                lines.append(f"{importer} → {imported} (l.{detail['line_number']}{via})")
    return lines


def test_import_contracts_hold() -> None:
    """``lint-imports`` keeps every contract; otherwise the offending imports are listed."""
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml")],
        check=False,
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Contracts:" in run.stdout, run.stdout + run.stderr  # the configuration is valid
    if run.returncode == 0:
        return
    sys.path.insert(0, str(PYTHON_DIR))
    try:
        graph = grimp.build_graph("heinfer")
    finally:
        sys.path.remove(str(PYTHON_DIR))
    report = []
    for contract in _contracts():
        offending = _offending_imports(graph, contract)
        if offending:
            report.append(f"{contract['name']}:\n  " + "\n  ".join(offending))
    broken = run.stdout[run.stdout.find("Broken contracts") :]
    raise AssertionError("layering broken\n" + "\n".join(report) + "\n\n" + broken)


def test_contracts_cover_every_layer() -> None:
    """Each layer of ARCHITECTURE.md is the source of a contract (the cli has nothing above)."""
    sources = {m for c in _contracts() for m in c["source_modules"]}
    assert {"heinfer.program", "heinfer.runtime", "heinfer.protocol", "heinfer.compiler"} <= sources
    assert "heinfer.serve" in sources
    assert "heinfer.cluster" in sources


def test_importing_the_compiler_does_not_load_the_native_module() -> None:
    """The compiler is pure numpy: a fresh interpreter importing it never loads ``_native``."""
    code = (
        "import sys, heinfer.compiler, heinfer.compiler.plan, heinfer.compiler.throughput\n"
        "print(sorted(m for m in sys.modules if m == 'heinfer._native' or "
        "m.startswith(('heinfer.runtime', 'heinfer.protocol', 'heinfer.serve'))))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", f"importing heinfer.compiler loaded {run.stdout.strip()}"
