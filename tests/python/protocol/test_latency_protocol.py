"""The client and server on slot-layout (latency) programs, driven by hand.

One ``heinfer.Client`` and one ``heinfer.Server`` serve both layouts. The keys message holds exactly the program's rotation keys (and a
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
from heinfer.explanation import program_key_bytes
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer import _native
from heinfer.protocol.messages import decode, encode
from protocol.forge import ANY_ROUNDING
from protocol.forge import fields as _fields
from protocol.forge import payload as _payload
from protocol.forge import reencode as _reencode

BAD = (heinfer.ProtocolError, heinfer.SerializationError)


def _program_key_bytes(prog) -> dict:
    """``heinfer.explain``'s key sizes (:func:`heinfer.explanation.program_key_bytes`)."""
    return program_key_bytes(prog)


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
        self.prog: heinfer.Program = heinfer.compile(
            self.model,
            mode="latency",
            calibration=om.random_input((8,), 64, seed=11),
            measure_costs=False,
        )
        self.client = heinfer.Client(self.prog.public())
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
        while decode(reply)[0] == "step":
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
        scale = seg.input_scale if scale is None else scale
        if count == 0:
            return b""  # (a batch holds at least one ciphertext)
        zeros = np.zeros((count, self.prog.slots), dtype=np.complex128)
        return _native.encrypt_batch(self.client._session_key.kg, zeros, scale, level).to_bytes()

    def keys_with(
        self, steps: list[int], relin: bool | None = None, conjugate: bool = False
    ) -> bytes:
        """A keys message of this client with rotation keys for ``steps``."""
        kg = self.client._session_key.kg
        relin = self.prog.needs_relin_key if relin is None else relin
        rlk = kg.relin_key().to_bytes() if relin else b""
        gk = kg.galois_keys(list(steps), conjugate).to_bytes() if steps or conjugate else b""
        return _reencode(self.keys, relin_key=rlk, galois_keys=gk)




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
    assert relu.prog.rotation_steps and sq.prog.rotation_steps
    assert relu.prog.mode == sq.prog.mode == "latency" and relu.prog.batch_capacity == 1
    assert sq.prog.params != relu.prog.params  # the squares need more levels
    assert relu.prog.segments[0].input_level >= 1 and sq.prog.segments[0].input_level >= 3


# ---------------------------------------------------------------------------------- one client, one server
def test_one_client_and_one_server_for_both_layouts(relu: Kit) -> None:
    assert type(relu.client) is heinfer.Client and type(relu.server) is heinfer.Server
    assert type(relu.client.program) is heinfer.PublicProgram
    assert "secret" not in repr(relu.client).lower()
    with pytest.raises(heinfer.ProtocolError, match="full program"):
        heinfer.Server(relu.prog.public())


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
    _, msg = decode(kit.keys, "keys")
    assert bool(msg.relin_key) == kit.prog.needs_relin_key
    if msg.relin_key:
        _native.RelinKey.from_bytes(kit.params, msg.relin_key, 1 << 30)
    gk = _native.GaloisKeys.from_bytes(kit.params, msg.galois_keys, 1 << 30)
    want = {kit.params.rotation_galois_element(s) for s in kit.prog.rotation_steps}
    assert set(gk.elements()) == want and len(gk) == len(kit.prog.rotation_steps)
    assert set(kit.prog.key_manifest["galois_elements"]) == want
    assert kit.prog.key_manifest["rotation_steps"] == list(kit.prog.rotation_steps)
    assert _program_key_bytes(kit.prog)["count"] == len(kit.prog.rotation_steps)
    assert msg.program_id == kit.prog.id


def _unused_step(prog: heinfer.Program) -> int:
    return next(s for s in range(1, prog.slots) if s not in prog.rotation_steps)


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
    steps = list(kit.prog.rotation_steps)
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
        sq.server.open_session(sq.keys_with(sq.prog.rotation_steps, relin=False))
    with pytest.raises(heinfer.ProtocolError):
        relu.server.open_session(relu.keys_with(relu.prog.rotation_steps, relin=True))
    sq.assert_good_query()
    relu.assert_good_query()


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00" * 7,
        struct.pack("<Q", 1 << 40),
        b"garbage",
        b"\x00" * 1000,
    ],
)
@pytest.mark.parametrize("field", ["galois_keys", "relin_key"])
def test_malformed_keys_are_refused(sq: Kit, field: str, payload: bytes) -> None:
    with pytest.raises(BAD):
        sq.server.open_session(_reencode(sq.keys, **{field: payload}))
    sq.assert_good_query()


def test_truncated_rotation_keys_are_refused(relu: Kit) -> None:
    gk = _fields(relu.keys)["galois_keys"]
    for cut in (9, len(gk) // 2, len(gk) - 1):
        with pytest.raises(BAD):
            relu.server.open_session(_reencode(relu.keys, galois_keys=gk[:cut]))
    relu.assert_good_query()


def test_keys_for_another_program_are_refused(relu: Kit, sq: Kit) -> None:
    with pytest.raises(heinfer.ProtocolError, match="keys are for program|exceeds the"):
        relu.server.open_session(sq.keys)
    with pytest.raises(heinfer.ProtocolError, match="keys are for program"):
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
    assert other.params == relu.prog.params and other.rotation_steps != relu.prog.rotation_steps
    keys = heinfer.Client(other.public()).keys_message()
    with pytest.raises(heinfer.ProtocolError, match="keys are for program"):
        relu.server.open_session(keys)
    # under this program's id, the rotation keys themselves are checked
    with pytest.raises(heinfer.ProtocolError, match="Galois elements|exceeds the|exactly the keys"):
        relu.server.open_session(_reencode(keys, program_id=relu.prog.id))
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


@pytest.mark.parametrize("items", [0, 2, 2**32 - 1, 10**9])
def test_query_with_more_than_one_item_is_refused(relu: Kit, items: int) -> None:
    msg = relu.client.query_message(relu.session, relu.x())
    with pytest.raises(heinfer.ProtocolError):
        relu.server.begin(_reencode(msg, items=items))
    relu.assert_good_query()


def _query_with(kit: Kit, payload: bytes) -> bytes:
    return _reencode(kit.client.query_message(kit.session, kit.x()), ciphertexts=payload)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("case", ["level-1", "level-0", "scale", "count-1", "count+1", "count-0"])
def test_query_ciphertexts_at_the_wrong_level_scale_or_count_are_refused(
    kits, name: str, case: str
) -> None:
    kit = kits[name]
    seg = kit.prog.segments[0]
    n, top = seg.n_input_cts, seg.input_level
    s = seg.input_scale
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
    # a level or scale is refused by the plan; a count by the plan or already by the decoder
    with pytest.raises(heinfer.ProtocolError if case.startswith(("level", "scale")) else BAD):
        kit.server.begin(_query_with(kit, payload))
    kit.assert_good_query()


def test_query_encrypted_under_other_parameters_is_refused(relu: Kit, sq: Kit) -> None:
    foreign = sq.cts(0, count=relu.prog.segments[0].n_input_cts, level=0)
    with pytest.raises(BAD):
        relu.server.begin(_query_with(relu, foreign))
    relu.assert_good_query()


def _payload_cases(good: bytes) -> dict[str, bytes]:
    return {
        "empty": b"",
        "magic-only": good[:4],
        "cut-in-header": good[:9],
        "cut-in-ciphertext": good[: len(good) // 2],
        "one-byte-short": good[:-1],
        "trailing-byte": good + b"\x00",
        "trailing-copy": good + good,
        "header-flipped": good[:6] + bytes([good[6] ^ 0x55]) + good[7:],
        "all-ones": b"\xff" * len(good),
    }


@pytest.mark.parametrize("case", list(_payload_cases(b"\x00" * 64)))
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
    while decode(reply)[0] == "step":
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
    while decode(out)[0] == "step":
        out = kit.server.resume(kit.client.reply_message(out))
    return kit.client.decode_result(out)


@pytest.mark.parametrize("wrong", [1, 5, 2**32 - 1])
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
    good = _payload(reply)
    payload = {
        "level-0": lambda: relu.cts(1, level=0) if seg.input_level > 0 else relu.cts(1, level=1),
        "scale": lambda: relu.cts(1, scale=3.0 * seg.input_scale),
        "count+1": lambda: relu.cts(1, count=seg.n_input_cts + 1),
        "count-0": lambda: relu.cts(1, count=0),
        "trailing-byte": lambda: good + b"\x01",
        "cut-in-ciphertext": lambda: _payload_cases(good)["cut-in-ciphertext"],
    }[case]()
    with pytest.raises(BAD):
        relu.server.resume(_reencode(reply, ciphertexts=payload))
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
@pytest.mark.parametrize("k", [1, 7, 2**32 - 1])
def test_client_refuses_a_step_that_does_not_exist(relu: Kit, k: int) -> None:
    _, step = _step(relu)
    with pytest.raises(heinfer.ProtocolError, match="step"):
        relu.client.reply_message(_reencode(step, step=k))
    # a query whose step was refused is forgotten: not even the real step resumes it
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
        relu.client.reply_message(step)
    relu.assert_good_query()


@pytest.mark.parametrize("kind", ["step", "result"])
def test_client_refuses_messages_for_a_query_it_never_sent(relu: Kit, kind: str) -> None:
    _, step = _step(relu)
    out = step if kind == "step" else relu.server.resume(relu.client.reply_message(step))
    fresh = heinfer.Client(relu.prog.public())
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
        fresh.reply_message(out) if kind == "step" else fresh.decode_result(out)
    _, body = decode(out)
    forged = encode("step", query=body.query, ref="ab" * 16, step=0, ciphertexts=body.ciphertexts)
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
        relu.client.reply_message(forged)


@pytest.mark.parametrize("count", [0, 2])
def test_client_refuses_a_result_with_the_wrong_ciphertext_count(relu: Kit, count: int) -> None:
    _, step = _step(relu)
    result = relu.server.resume(relu.client.reply_message(step))
    batch = _native.CiphertextBatch.from_bytes(relu.params, _payload(result), 1 << 30, 1 << 10, ANY_ROUNDING)
    want = relu.prog.segments[-1].n_output_cts
    bad = batch.take([0] * (want + 1)).to_bytes() if count else b""
    with pytest.raises(BAD):
        relu.client.decode_result(_reencode(result, ciphertexts=bad))
    relu.assert_good_query()  # (a result ends its query, as in throughput mode, even a bad one)
