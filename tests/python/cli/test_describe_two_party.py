"""``heinfer inspect`` on two-party programs (``heinfer.cli.describe_two_party``): the sizes it
states are the sizes of the messages a run sends, and ``mode="auto"``'s record survives the
program file (server's and public)."""

from __future__ import annotations

import json
import os

import heinfer
import numpy as np
import pytest
from click.testing import CliRunner
from heinfer.cli import cli
from heinfer.cli.describe_two_party import describe_two_party
from heinfer.errors import SerializationError
from heinfer.program.format import dump, load
from heinfer.program.two_party_codec import two_party_public_from_json, two_party_public_to_json
from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer, queries

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODEL = os.path.join(ROOT, "models", "mnist_a.onnx")


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    return np.load(os.path.join(ROOT, "models", "digits_test.npz"))["x"]


@pytest.mark.parametrize("mode", ["latency", "throughput"])
def test_the_stated_ciphertext_bytes_are_the_bytes_a_query_sends(digits: np.ndarray, mode: str) -> None:
    prog = heinfer.compile(MODEL, mode=mode, protocol="two-party", calibration=digits[:32], batch_size=3)
    desc = describe_two_party(prog)
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    batch = next(iter(queries(prog, digits[:3])))
    req = client.offline_request(len(batch))
    offline = server.offline(req)
    client.offline_finish(offline)
    msgs = client.query(batch)
    for k, lay in enumerate(desc["layers"]):
        res = server.layer(k, msgs)
        up, down = sum(map(len, msgs)), sum(map(len, res))
        # the stated sizes are the ciphertexts' own (headers of a few bytes each on top)
        assert lay["bytes_up"] <= up <= 1.01 * lay["bytes_up"], (k, up, lay)
        assert lay["bytes_down"] <= down <= 1.01 * lay["bytes_down"], (k, down, lay)
        if k == len(prog.steps):
            break
        choices = client.choose(k, res)
        msgs = client.next_input(k, server.labels(k, choices))
    # garbled tables: the larger part of the offline messages (labels and output tables the rest)
    tables, sent = desc["query_bytes"]["garbled_tables"] * len(batch) // prog.batch_capacity, sum(map(len, offline))
    assert 0.5 * sent < tables < sent
    assert desc["session_keys"]["rotation_keys"] == (len(prog.rotation_steps) if mode == "latency" else 0)


def test_auto_s_record_survives_both_program_files_and_inspect_prints_it(digits: np.ndarray, tmp_path) -> None:
    prog = heinfer.compile(MODEL, mode="auto", protocol="two-party", calibration=digits[:32], batch_size=5, measure_costs=False)
    record = prog.meta["auto"]
    assert set(record) >= {"batch_size", "latency_s", "throughput_s"}
    for p in (prog, prog.public()):
        back = load(dump(p))
        assert back.meta == {"auto": record} and back.id == prog.id
    path = tmp_path / "a.hep"
    path.write_bytes(prog.public().to_bytes())
    r = CliRunner().invoke(cli, ["inspect", str(path)])
    assert r.exit_code == 0, r.output
    for text in ("two-party program (GAZELLE)", "linear layers (BFV", "garbled-circuit steps", "mode chosen by auto for 5 item(s)"):
        assert text in r.output
    got = json.loads(CliRunner().invoke(cli, ["inspect", str(path), "--json"]).output)
    assert got["auto"] == record and not got["has_weights"] and got["steps"][0]["kind"] == "square"
    # a program compiled for one mode keeps its bytes (and id): no record is written
    plain = heinfer.compile(MODEL, mode="latency", protocol="two-party", calibration=digits[:32])
    assert "meta" not in two_party_public_to_json(plain)[0] and load(dump(plain)).meta == {}


def test_a_forged_auto_record_is_refused(digits: np.ndarray) -> None:
    prog = heinfer.compile(MODEL, mode="auto", protocol="two-party", calibration=digits[:32], batch_size=5, measure_costs=False)
    manifest, arrays = two_party_public_to_json(prog)
    assert two_party_public_from_json(manifest, arrays).meta == {"auto": prog.meta["auto"]}
    for bad in ({"auto": "fast"}, {"auto": {"batch_size": "5"}}, {"auto": {"batch_size": 5, "latency_s": "0"}}, {"plans": {}}, ["auto"]):
        with pytest.raises(SerializationError, match="meta"):
            two_party_public_from_json({**manifest, "meta": bad}, arrays)
