"""The checked-in protobuf code is what ``make proto`` generates from ``proto/`` (grpcio-tools,
pinned in the set-up): a change to a ``.proto`` without regenerating fails here."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_proto_files(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("grpc_tools")
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    assert protos, "no .proto files"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"), f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", *protos]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert generated
    for rel in generated:
        checked_in = ROOT / "python" / rel
        assert checked_in.exists(), f"{rel} is generated but not checked in: run `make proto`"
        assert checked_in.read_bytes() == (tmp_path / rel).read_bytes(), f"{rel} differs from what `make proto` generates"
