"""The latency-mode client and server (``heinfer.protocol.latency``) driven by hand.

``heinfer.Client``/``heinfer.Server`` dispatch to :class:`LatencyClient`/:class:`LatencyServer`
for a latency program. The keys message holds exactly the program's rotation keys (and a
relinearization key iff a segment squares); the server refuses one missing or one extra.
Every other untrusted message — keys for another program, queries of the wrong shape, with
ciphertexts at the wrong level or scale, of the wrong count, truncated or followed by trailing
bytes, replies to unknown queries or for the wrong step — is refused with
:class:`heinfer.ProtocolError` (or :class:`heinfer.SerializationError` when a ciphertext itself
does not decode), and after each one the server still answers a good query correctly.
Replies of queries in flight may arrive in any order.
"""

from __future__ import annotations

import copy
import pickle
import struct

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer import _native
from heinfer.program.latency import LatencyProgram
from heinfer.protocol.latency import LatencyClient, LatencyServer, pack_cts
from heinfer.protocol.messages import Message, decode, encode

BAD = (heinfer.ProtocolError, heinfer.SerializationError)


# ---------------------------------------------------------------------------------- programs
def _square_relu() -> bytes:
    """Gemm → x² → Gemm → Relu → Gemm: a squaring first segment (relinearization key) and a
    second segment after a client step."""
    b = ModelBuilder((8,), seed=5)
    b.node("Gemm", [b.last, b.weight(8, 8), b.weight(8, fan_in=8)], transB=1)
    b.node("Mul", [b.last, b.last])
    b.node("Gemm", [b.last, b.weight(8, 8), b.weight(8, fan_in=8)], transB=1)
    b.node("Relu", [b.last])
    b.node("Gemm", [b.last, b.weight(4, 8), b.weight(4, fan_in=8)], transB=1)
    return b.build()


MODELS = {
    "relu": lambda: om.mlp((8, 16, 4), act="relu", seed=1),
    "square-relu": _square_relu,
}


class Kit:
    """A compiled program with one client, one server and one open session."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.model = MODELS[name]()
        self.prog: LatencyProgram = heinfer.compile(
            self.model,
            mode="latency",
            calibration=om.random_input((8,), 64, seed=11),
            measure_costs=False,
        )
        self.client = heinfer.Client(self.prog)
        self.server = heinfer.Server(self.prog)
        self.keys = self.client.keys_message()
        self.session = self.server.open_session(self.keys)

    @property
    def params(self) -> _native.Params:
        return self.client.params

    def x(self, seed: int = 3) -> np.ndarray:
        return om.random_input((8,), 1, seed=seed)

    def run(self, x: np.ndarray, session: str | None = None) -> np.ndarray:
        reply = self.server.begin(self.client.query_message(session or self.session, x))
        while decode(reply).kind == "step":
            reply = self.server.resume(self.client.reply_message(reply))
        return self.client.decode_result(reply)

    def check(self, got: np.ndarray, x: np.ndarray) -> None:
        want = om.run_onnxruntime(self.model, x)
        np.testing.assert_allclose(got, want, atol=1e-3 * max(1.0, np.abs(want).max()))

    def assert_good_query(self, seed: int = 9) -> None:
        """The server still answers a good query correctly."""
        x = self.x(seed)
        self.check(self.run(x), x)

    def cts(
        self,
        segment: int,
        count: int | None = None,
        level: int | None = None,
        scale: float | None = None,
    ) -> bytes:
        """A payload of encrypted zeros for ``segment`` (optionally the wrong count, level or
        scale)."""
        seg = self.prog.segments[segment]
        count = seg.n_input_cts if count is None else count
        level = seg.input_level if level is None else level
        scale = float(2 ** self.prog.params["log_scale"]) if scale is None else scale
        enc = self.client._enc
        zeros = np.zeros(self.prog.slots)
        return pack_cts(
            [
                self.client._kg.encrypt_symmetric(enc.encode_real(zeros, scale, level, False))
                for _ in range(count)
            ]
        )

    def keys_with(
        self, steps: list[int], relin: bool | None = None, conjugate: bool = False
    ) -> bytes:
        """A keys message of this client with rotation keys for ``steps``."""
        kg = self.client._kg
        relin = self.prog.needs_relin_key if relin is None else relin
        rlk = kg.relin_key().to_bytes() if relin else b""
        gk = kg.galois_keys(list(steps), conjugate).to_bytes() if steps or conjugate else b""
        return _reencode(self.keys, struct.pack("<Q", len(rlk)) + rlk + gk)


def _reencode(message: bytes, payload: bytes | None = None, **header) -> bytes:
    msg = decode(message)
    return encode(
        Message(msg.kind, {**msg.header, **header}, msg.payload if payload is None else payload)
    )


@pytest.fixture(scope="module")
def kits() -> dict[str, Kit]:
    return {name: Kit(name) for name in MODELS}


@pytest.fixture(scope="module")
def relu(kits) -> Kit:
    return kits["relu"]


@pytest.fixture(scope="module")
def sq(kits) -> Kit:
    return kits["square-relu"]


def test_the_programs_have_the_shapes_the_tests_need(relu: Kit, sq: Kit) -> None:
    assert len(relu.prog.steps) == 1 and not relu.prog.needs_relin_key
    assert sq.prog.needs_relin_key and len(sq.prog.steps) == 1
    assert relu.prog.galois_steps and sq.prog.galois_steps
    assert sq.prog.params != relu.prog.params  # the squares need more levels
    assert relu.prog.segments[0].input_level >= 1 and sq.prog.segments[0].input_level >= 3


# ---------------------------------------------------------------------------------- dispatch
def test_client_and_server_dispatch_on_the_program_mode(relu: Kit) -> None:
    assert type(relu.client) is LatencyClient and isinstance(relu.server, LatencyServer)
    assert type(heinfer.Server(relu.prog)) is LatencyServer
    assert "secret" not in repr(relu.client).lower()


@pytest.mark.parametrize("fn", [pickle.dumps, copy.copy, copy.deepcopy])
def test_client_cannot_be_pickled_or_copied(relu: Kit, fn) -> None:
    with pytest.raises(TypeError):
        fn(relu.client)


def test_server_refuses_a_baseline(relu: Kit) -> None:
    with pytest.raises(heinfer.ProtocolError, match="baseline"):
        heinfer.Server(relu.prog, baseline=True)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_good_query_is_answered(kits, name: str) -> None:
    kits[name].assert_good_query(seed=1)


# ---------------------------------------------------------------------------------- keys
@pytest.mark.parametrize("name", list(MODELS))
def test_keys_message_holds_exactly_the_programs_keys(kits, name: str) -> None:
    kit = kits[name]
    msg = decode(kit.keys, "keys")
    (n,) = struct.unpack_from("<Q", msg.payload, 0)
    assert (n > 0) == kit.prog.needs_relin_key
    if n:
        _native.RelinKey.from_bytes(kit.params, msg.payload[8 : 8 + n], 1 << 30)
    gk = _native.GaloisKeys.from_bytes(kit.params, msg.payload[8 + n :], 1 << 30)
    want = {kit.params.rotation_galois_element(s) for s in kit.prog.galois_steps}
    assert set(gk.elements()) == want and len(gk) == len(kit.prog.galois_steps)
    assert kit.prog.key_manifest["rotation_steps"] == list(kit.prog.galois_steps)
    assert kit.prog.key_bytes()["count"] == len(kit.prog.galois_steps)


def _unused_step(prog: LatencyProgram) -> int:
    return next(s for s in range(1, prog.slots) if s not in prog.galois_steps)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize(
    "case",
    [
        "missing-first",
        "missing-last",
        "extra-step",
        "extra-conjugation",
        "no-rotation-keys",
        "other-steps",
    ],
)
def test_keys_not_exactly_the_rotation_keys_are_refused(kits, name: str, case: str) -> None:
    kit = kits[name]
    steps = list(kit.prog.galois_steps)
    message = {
        "missing-first": lambda: kit.keys_with(steps[1:]),
        "missing-last": lambda: kit.keys_with(steps[:-1]),
        "extra-step": lambda: kit.keys_with([*steps, _unused_step(kit.prog)]),
        "extra-conjugation": lambda: kit.keys_with(steps, conjugate=True),
        "no-rotation-keys": lambda: kit.keys_with([]),
        "other-steps": lambda: kit.keys_with([_unused_step(kit.prog)] + steps[1:]),
    }[case]()
    with pytest.raises(heinfer.ProtocolError):
        kit.server.open_session(message)
    kit.assert_good_query()


def test_relinearization_key_missing_or_unneeded_is_refused(relu: Kit, sq: Kit) -> None:
    with pytest.raises(heinfer.ProtocolError):
        sq.server.open_session(sq.keys_with(sq.prog.galois_steps, relin=False))
    with pytest.raises(heinfer.ProtocolError):
        relu.server.open_session(relu.keys_with(relu.prog.galois_steps, relin=True))
    sq.assert_good_query()
    relu.assert_good_query()


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00" * 7,
        struct.pack("<Q", 1 << 40),  # relinearization key longer than the message
        struct.pack("<Q", 0) + b"garbage",
        struct.pack("<Q", 0) + b"\x00" * 1000,
    ],
)
def test_malformed_keys_payload_is_refused(relu: Kit, payload: bytes) -> None:
    with pytest.raises(BAD):
        relu.server.open_session(_reencode(relu.keys, payload))
    relu.assert_good_query()


def test_truncated_rotation_keys_are_refused(relu: Kit) -> None:
    msg = decode(relu.keys)
    for cut in (9, len(msg.payload) // 2, len(msg.payload) - 1):
        with pytest.raises(BAD):
            relu.server.open_session(_reencode(relu.keys, msg.payload[:cut]))
    relu.assert_good_query()


def test_keys_for_another_program_are_refused(relu: Kit, sq: Kit) -> None:
    with pytest.raises(heinfer.ProtocolError, match="parameters"):
        relu.server.open_session(sq.keys)
    with pytest.raises(heinfer.ProtocolError, match="parameters"):
        sq.server.open_session(relu.keys)
    with pytest.raises(heinfer.ProtocolError):
        relu.server.open_session(_reencode(relu.keys, program_id="0" * 16))
    relu.assert_good_query()
    sq.assert_good_query()


def test_keys_of_a_program_with_the_same_parameters_but_other_rotations_are_refused(
    relu: Kit,
) -> None:
    other = heinfer.compile(
        om.mlp((8, 5, 4), act="relu", seed=7),
        mode="latency",
        calibration=om.random_input((8,), 64, seed=11),
        measure_costs=False,
    )
    assert other.params == relu.prog.params and other.galois_steps != relu.prog.galois_steps
    with pytest.raises(heinfer.ProtocolError):
        relu.server.open_session(heinfer.Client(other).keys_message())
    relu.assert_good_query()


def test_too_many_sessions_are_refused(relu: Kit) -> None:
    server = heinfer.Server(relu.prog, max_sessions=1)
    server.open_session(relu.keys)
    with pytest.raises(heinfer.ProtocolError, match="sessions"):
        server.open_session(relu.keys)


# ---------------------------------------------------------------------------------- queries
@pytest.mark.parametrize("shape", [(2, 8), (8,), (1, 9), (1, 2, 4), (0, 8)])
def test_client_refuses_inputs_of_the_wrong_shape(relu: Kit, shape: tuple) -> None:
    with pytest.raises(heinfer.ProtocolError):
        relu.client.query_message(relu.session, np.zeros(shape, np.float32))


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e6])
def test_client_refuses_inputs_out_of_range(relu: Kit, value: float) -> None:
    x = relu.x()
    x[0, 3] = value
    with pytest.raises(heinfer.RangeError):
        relu.client.query_message(relu.session, x)


def test_query_for_an_unknown_session_is_refused(relu: Kit) -> None:
    msg = relu.client.query_message(relu.session, relu.x())
    with pytest.raises(heinfer.ProtocolError, match="session"):
        relu.server.begin(_reencode(msg, session="f" * 32))
    relu.assert_good_query()


@pytest.mark.parametrize("items", [0, 2, -1, 10**9])
def test_query_with_more_than_one_item_is_refused(relu: Kit, items: int) -> None:
    msg = relu.client.query_message(relu.session, relu.x())
    with pytest.raises(heinfer.ProtocolError):
        relu.server.begin(_reencode(msg, items=items))
    relu.assert_good_query()


def _query_with(kit: Kit, payload: bytes) -> bytes:
    return _reencode(kit.client.query_message(kit.session, kit.x()), payload)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("case", ["level-1", "level-0", "scale", "count-1", "count+1", "count-0"])
def test_query_ciphertexts_at_the_wrong_level_scale_or_count_are_refused(
    kits, name: str, case: str
) -> None:
    kit = kits[name]
    seg = kit.prog.segments[0]
    n, top = seg.n_input_cts, seg.input_level
    s = float(2 ** kit.prog.params["log_scale"])
    if case.startswith("level") and top == 0:
        pytest.skip("the first segment is at level 0")
    payload = {
        "level-1": lambda: kit.cts(0, level=top - 1),
        "level-0": lambda: kit.cts(0, level=0),
        "scale": lambda: kit.cts(0, scale=2 * s),
        "count-1": lambda: kit.cts(0, count=n - 1),
        "count+1": lambda: kit.cts(0, count=n + 1),
        "count-0": lambda: kit.cts(0, count=0),
    }[case]()
    with pytest.raises(heinfer.ProtocolError):
        kit.server.begin(_query_with(kit, payload))
    kit.assert_good_query()


def test_query_encrypted_under_other_parameters_is_refused(relu: Kit, sq: Kit) -> None:
    foreign = sq.cts(0, count=relu.prog.segments[0].n_input_cts, level=0)
    with pytest.raises(BAD):
        relu.server.begin(_query_with(relu, foreign))
    relu.assert_good_query()


def _payload_cases(good: bytes) -> dict[str, bytes]:
    (m,) = struct.unpack_from("<Q", good, 4)
    return {
        "empty": b"",
        "count-only": good[:4],
        "cut-in-length": good[:9],
        "cut-in-ciphertext": good[: 12 + m // 2],
        "one-byte-short": good[:-1],
        "trailing-byte": good + b"\x00",
        "trailing-ciphertext": good + good[4:],
        "count-says-more": struct.pack("<I", struct.unpack_from("<I", good)[0] + 1) + good[4:],
        "length-overruns": good[:4] + struct.pack("<Q", len(good)) + good[12:],
        "length-huge": good[:4] + struct.pack("<Q", (1 << 64) - 1) + good[12:],
        "length-short": good[:4] + struct.pack("<Q", m - 8) + good[12:],
    }


@pytest.mark.parametrize("case", list(_payload_cases(struct.pack("<IQ", 1, 16) + b"\x00" * 16)))
def test_query_with_a_truncated_or_padded_payload_is_refused(relu: Kit, case: str) -> None:
    payload = _payload_cases(relu.cts(0))[case]
    with pytest.raises(BAD):
        relu.server.begin(_query_with(relu, payload))
    relu.assert_good_query()


# ---------------------------------------------------------------------------------- replies
def _step(kit: Kit, seed: int = 4) -> tuple[np.ndarray, bytes]:
    x = kit.x(seed)
    return x, kit.server.begin(kit.client.query_message(kit.session, x))


def _finish(kit: Kit, step: bytes, x: np.ndarray) -> None:
    reply = kit.server.resume(kit.client.reply_message(step))
    while decode(reply).kind == "step":
        reply = kit.server.resume(kit.client.reply_message(reply))
    kit.check(kit.client.decode_result(reply), x)


def test_reply_to_an_unknown_query_is_refused(relu: Kit) -> None:
    x, step = _step(relu)
    reply = relu.client.reply_message(step)
    with pytest.raises(heinfer.ProtocolError, match="query"):
        relu.server.resume(_reencode(reply, query="0" * 32))
    relu.check(_finish_reply(relu, reply), x)  # the real query is still waiting
    relu.assert_good_query()


def _finish_reply(kit: Kit, reply: bytes) -> np.ndarray:
    out = kit.server.resume(reply)
    while decode(out).kind == "step":
        out = kit.server.resume(kit.client.reply_message(out))
    return kit.client.decode_result(out)


@pytest.mark.parametrize("wrong", [1, -1, 5])
def test_reply_for_the_wrong_step_is_refused_and_the_query_survives(relu: Kit, wrong: int) -> None:
    x, step = _step(relu)
    reply = relu.client.reply_message(step)
    with pytest.raises(heinfer.ProtocolError, match="step"):
        relu.server.resume(_reencode(reply, step=wrong))
    relu.check(_finish_reply(relu, reply), x)


def test_replayed_reply_is_refused(relu: Kit) -> None:
    x, step = _step(relu)
    reply = relu.client.reply_message(step)
    relu.check(_finish_reply(relu, reply), x)
    with pytest.raises(heinfer.ProtocolError):
        relu.server.resume(reply)
    relu.assert_good_query()


@pytest.mark.parametrize(
    "case", ["level-0", "scale", "count+1", "count-0", "trailing-byte", "cut-in-ciphertext"]
)
def test_reply_with_bad_ciphertexts_is_refused(relu: Kit, case: str) -> None:
    _, step = _step(relu)
    reply = relu.client.reply_message(step)
    seg = relu.prog.segments[1]
    good = decode(reply).payload
    payload = {
        "level-0": lambda: relu.cts(1, level=0) if seg.input_level > 0 else relu.cts(1, level=1),
        "scale": lambda: relu.cts(1, scale=3.0 * 2 ** relu.prog.params["log_scale"]),
        "count+1": lambda: relu.cts(1, count=seg.n_input_cts + 1),
        "count-0": lambda: relu.cts(1, count=0),
        "trailing-byte": lambda: good + b"\x01",
        "cut-in-ciphertext": lambda: _payload_cases(good)["cut-in-ciphertext"],
    }[case]()
    with pytest.raises(BAD):
        relu.server.resume(_reencode(reply, payload))
    relu.assert_good_query()


@pytest.mark.parametrize("name", list(MODELS))
def test_replies_of_queries_in_flight_out_of_order(kits, name: str) -> None:
    kit = kits[name]
    second_session = kit.server.open_session(kit.keys)
    xs = [kit.x(seed) for seed in (21, 22, 23)]
    sessions = [kit.session, kit.session, second_session]
    steps = [kit.server.begin(kit.client.query_message(s, x)) for s, x in zip(sessions, xs)]
    replies = [kit.client.reply_message(st) for st in steps]
    results = {}
    for i in (2, 0, 1):  # the last first
        results[i] = _finish_reply(kit, replies[i])
    for i, x in enumerate(xs):
        kit.check(results[i], x)
    kit.server.close_session(second_session)


def test_closing_a_session_forgets_its_queries(relu: Kit) -> None:
    session = relu.server.open_session(relu.keys)
    step = relu.server.begin(relu.client.query_message(session, relu.x()))
    relu.server.close_session(session)
    with pytest.raises(heinfer.ProtocolError):
        relu.server.resume(relu.client.reply_message(step))
    with pytest.raises(heinfer.ProtocolError, match="session"):
        relu.server.begin(relu.client.query_message(session, relu.x()))
    relu.assert_good_query()


# ---------------------------------------------------------------------------------- client side
def test_client_refuses_a_step_that_does_not_exist(relu: Kit) -> None:
    _, step = _step(relu)
    for k in (1, -1, 7):
        with pytest.raises(heinfer.ProtocolError, match="step"):
            relu.client.reply_message(_reencode(step, step=k))
    relu.server.resume(relu.client.reply_message(step))  # the query finishes normally


@pytest.mark.parametrize("kind", ["step", "result"])
def test_client_refuses_messages_for_a_query_it_never_sent(relu: Kit, kind: str) -> None:
    _, step = _step(relu)
    out = step if kind == "step" else relu.server.resume(relu.client.reply_message(step))
    fresh = heinfer.Client(relu.prog)
    with pytest.raises(heinfer.ProtocolError):
        fresh.reply_message(out) if kind == "step" else fresh.decode_result(out)
    with pytest.raises(heinfer.ProtocolError):
        relu.client.reply_message(_reencode(out, kind="step", ref="x" * 32, step=0, group_sizes=[]))


def test_client_refuses_a_server_message_for_several_items(relu: Kit) -> None:
    _, step = _step(relu)
    with pytest.raises(heinfer.ProtocolError, match="items"):
        relu.client.reply_message(_reencode(step, items=2))
    relu.server.resume(relu.client.reply_message(step))


@pytest.mark.parametrize("count", [0, 2])
def test_client_refuses_a_result_with_the_wrong_ciphertext_count(relu: Kit, count: int) -> None:
    _, step = _step(relu)
    result = relu.server.resume(relu.client.reply_message(step))
    payload = decode(result).payload
    (m,) = struct.unpack_from("<Q", payload, 4)
    one = payload[4 : 12 + m]
    bad = struct.pack("<I", count) + one * count
    with pytest.raises(heinfer.ProtocolError):
        relu.client.decode_result(_reencode(result, bad))
    relu.assert_good_query()  # (a result ends its query, as in throughput mode, even a bad one)
