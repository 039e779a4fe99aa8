"""Secret hygiene, tested as an attacker on the server would look for the client's secret key.

After real protocol runs (the bundled ``cryptonets_relu`` with client-aided steps and a fresh
key per query; a tiny square MLP whose session key has a relinearization key), everything the
server side can reach is searched for the secret keys' bytes, or any 16-byte run of them, raw,
hex or base64: the program's bytes, every object reachable from the ``Server`` (walked with
``gc.get_referents``, mid-query and after the session), their ``repr``s, the bytes of every
native object that serializes, every message, DEBUG logs and the messages of failed calls.
No secret-key object may be reachable from the server at all. The client cannot be pickled or
copied and its ``repr`` holds no key material. Positive controls check that each detector
does find a secret where one is planted, so these tests can fail.
"""

from __future__ import annotations

import base64
import copy
import logging
import pickle
import types
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from conftest import Kit
from heinfer import _native, ckks
from heinfer.protocol import client as client_mod
from heinfer.protocol.messages import encode, peek_kind
from secret_scan import SecretScanner, walk

MODELS = Path(__file__).resolve().parents[2] / "models"

#: Types that hold (or are) a secret key; none may be reachable from a server.
SECRET_TYPES = (
    _native.SecretKey,
    _native.KeyGenerator,
    _native.Decryptor,
    ckks.SecretKey,
    ckks.KeyGenerator,
    ckks.Decryptor,
    heinfer.Client,
    client_mod._Key,
)


@cache
def _program(name: str) -> heinfer.Program:
    if name == "cryptonets_relu":
        calibration = np.load(MODELS / "digits_test.npz")["x"][:16]
        return heinfer.compile(str(MODELS / "cryptonets_relu.onnx"), calibration=calibration)
    calibration = np.random.default_rng(5).normal(0, 1, (16, 8))
    return heinfer.compile(om.mlp((8, 6, 4), act="square"), calibration=calibration)


def _inputs(name: str) -> np.ndarray:
    if name == "cryptonets_relu":
        return np.load(MODELS / "digits_test.npz")["x"][16:18]
    return np.random.default_rng(6).normal(0, 1, (2, 8))


@dataclass
class Run:
    """One session of a real client and server, and what an attacker gathers from it."""

    client: heinfer.Client
    server: heinfer.Server
    secrets: list[bytes] = field(default_factory=list)  # every secret key the client used
    messages: list[bytes] = field(default_factory=list)
    mid_query: list[object] = field(default_factory=list)  # reachable while a query ran
    errors: list[str] = field(default_factory=list)


def _note_secrets(run: Run) -> None:
    keys = [q.key for q in run.client._queries.values()]
    keys += [run.client._session_key] if run.client._session_key else []
    for key in keys:
        sk = key.kg.secret_key().to_bytes()
        if sk not in run.secrets:
            run.secrets.append(sk)


def _protocol(name: str) -> Run:
    program = _program(name)
    run = Run(heinfer.Client(program.public()), heinfer.Server(program))
    keys = run.client.keys_message()
    session = run.server.open_session(keys)
    query = run.client.query_message(session, _inputs(name))
    _note_secrets(run)
    reply = run.server.begin(query)
    run.mid_query = walk(run.server)
    run.messages += [keys, query, reply]
    while peek_kind(reply) == "step":
        back = run.client.reply_message(reply)
        reply = run.server.resume(back)
        run.messages += [back, reply]
    run.client.decode_result(reply)
    run.errors = _failed_calls(run.server, session, keys, query)
    run.server.close_session(session)
    return run


def _failed_calls(server: heinfer.Server, session: str, keys: bytes, query: bytes) -> list[str]:
    """Messages of server calls that fail: truncated, corrupted, misplaced or foreign input."""
    flipped = bytearray(query)
    flipped[len(flipped) // 2] ^= 0xFF
    calls = [
        lambda: server.open_session(keys[: len(keys) // 2]),
        lambda: server.open_session(b"\x00" * 64),
        lambda: server.begin(query[: len(query) // 2]),
        lambda: server.begin(keys),
        lambda: server.begin(bytes(flipped)),
        lambda: server.begin(encode("query", session="0" * 32, ref="r", items=1, ciphertexts=b"")),
        lambda: server.resume(query),
        lambda: server.resume(b"\xff" * 32),
    ]
    errors = []
    for call in calls:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - every failure's text is what we search
            while e is not None:
                errors += [str(e), repr(e)]
                e = e.__cause__ or e.__context__
    assert len(errors) >= 2 * 6, errors  # most of these calls must fail
    return errors


_RUNS: dict[str, Run] = {}


@pytest.fixture(scope="module", params=["cryptonets_relu", "square_mlp"])
def run(request: pytest.FixtureRequest) -> Run:
    if request.param not in _RUNS:
        _RUNS[request.param] = _protocol(request.param)
    return _RUNS[request.param]


# ---------------------------------------------------------------------------- the attacker
def test_the_client_used_real_secret_keys(run: Run) -> None:
    assert run.secrets and all(len(sk) > 256 for sk in run.secrets)


def test_program_and_messages_hold_no_secret(run: Run) -> None:
    scan = SecretScanner(run.secrets)
    program = run.server.program
    for blob in [program.to_bytes(), program.public().to_bytes(), *run.messages]:
        assert not scan.found(blob)


def test_nothing_reachable_from_the_server_holds_a_secret(run: Run) -> None:
    scan = SecretScanner(run.secrets)
    # the walk does reach the server's data: the program's weights and the session's keys
    assert any(isinstance(o, heinfer.Program) for o in run.mid_query)
    relin = any(isinstance(o, _native.RelinKey) for o in run.mid_query)
    assert relin == run.server.program.needs_relin_key
    for when, objs in (("mid-query", run.mid_query), ("after the session", walk(run.server))):
        held = [type(o).__name__ for o in objs if isinstance(o, SECRET_TYPES)]
        assert not held, f"{when}: the server reaches {held}"
        leaks = [type(o).__name__ for o in objs if scan.found_in_object(o)]
        assert not leaks, f"{when}: secret key bytes in {leaks}"


def test_failed_calls_say_nothing_secret(run: Run) -> None:
    scan = SecretScanner(run.secrets)
    assert not [e for e in run.errors if scan.found(e)]


@pytest.mark.parametrize("name", ["cryptonets_relu", "square_mlp"])
def test_debug_logs_hold_no_secret(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("heinfer").setLevel(logging.DEBUG)
        run = _protocol(name)
    scan = SecretScanner(run.secrets)
    assert not scan.found(caplog.text)
    for record in caplog.records:
        assert not scan.found(record.getMessage()) and not scan.found(repr(record.args))


# ---------------------------------------------------------------------------- the client
def test_client_cannot_be_pickled_or_copied(run: Run) -> None:
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError):
            attempt(run.client)


def test_client_repr_holds_no_key_material(run: Run) -> None:
    scan = SecretScanner(run.secrets)
    for text in (repr(run.client), str(run.client), f"{run.client!r}"):
        assert len(text) < 120 and not scan.found(text), text


# ---------------------------------------------------------------------------- the detectors
def test_the_detectors_find_a_planted_secret(run: Run) -> None:
    """Positive controls: a secret planted in bytes, text or an object graph is found."""
    sk = run.secrets[0]
    scan = SecretScanner(run.secrets)
    noise = np.random.default_rng(0).bytes(4096)
    assert scan.found(noise + sk[100:117] + noise)
    assert scan.found(f"key {sk[40:60].hex()} !") and scan.found(f"key {sk[40:60].hex().upper()}")
    assert scan.found(base64.b64encode(noise[:7] + sk[16:]).decode())
    assert scan.found(np.frombuffer(sk, dtype=np.uint8)[30:50].copy())
    assert not scan.found(noise) and not scan.found(sk[:31])  # header + 15 bytes: too short
    holder = types.SimpleNamespace(cb=lambda: run.client)
    assert any(isinstance(o, heinfer.Client) for o in walk(holder))
    assert any(isinstance(o, _native.KeyGenerator) for o in walk(run.client))
    if run.client._session_key:
        assert any(scan.found_in_object(o) for o in walk(run.client._session_key.kg.secret_key()))


# ---------------------------------------------------------------------------- ckks objects
def test_ckks_secret_objects_print_nothing(kit10: Kit) -> None:
    sk = kit10.kg.secret_key
    scan = SecretScanner([sk.to_bytes()])
    for obj in (sk, kit10.kg, kit10.decryptor, sk._raw, kit10.kg._raw):
        for text in (repr(obj), str(obj), f"{obj}"):
            assert len(text) < 120 and not scan.found(text), text
    assert "<secret>" in repr(sk) and "<secret>" in repr(kit10.kg)


def test_ckks_secret_objects_cannot_be_pickled(kit10: Kit) -> None:
    for obj in (kit10.kg.secret_key, kit10.kg, kit10.decryptor):
        with pytest.raises(TypeError):
            pickle.dumps(obj)
        with pytest.raises(TypeError):
            vars(obj)


def test_gc_sees_no_secret_behind_evaluation_objects(kit10: Kit) -> None:
    """The evaluator and evaluation keys reach no secret-key object."""
    for obj in (kit10.ev, kit10.pk, kit10.rlk, kit10.gks):
        assert not [o for o in walk(obj) if isinstance(o, SECRET_TYPES)]
