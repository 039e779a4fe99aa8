"""The client/server protocol driven by hand (``heinfer.protocol``).

Every message the server receives is untrusted: keys for another program, queries for an
unknown session, replies out of order, for an unknown query, with the wrong number of
ciphertexts or at the wrong level, and malformed bytes are refused with
:class:`heinfer.ProtocolError` (or :class:`heinfer.SerializationError` when the ciphertext
payload itself does not decode) — and the server keeps answering good queries afterwards.
The client-aided steps hide what they can: the values a client sees in a ReLU step are
permuted and multiplied by a positive per-neuron factor in ``[1/R, R]``.
"""

from __future__ import annotations

import copy
import json
import pickle
import struct
from functools import cache

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer import _native
from heinfer.compiler import fold_linear, load_onnx
from heinfer.program import Program
from heinfer.protocol import Client, Server
from heinfer.protocol.messages import MAGIC, VERSION, Message, decode, encode
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

BAD = (heinfer.ProtocolError, heinfer.SerializationError)


# ---------------------------------------------------------------------------------- programs
def _square_then_relu() -> bytes:
    """Gemm → x² → Gemm → x² → Gemm → Relu → Gemm: a deep first segment (input at the top
    level, relinearization key needed) and a shallow second one (input at level 0)."""
    b = ModelBuilder((8,), seed=5)
    for i, (k, m) in enumerate([(8, 8), (8, 8), (8, 8), (8, 4)]):
        if i in (1, 2):
            b.node("Mul", [b.last, b.last])
        if i == 3:
            b.node("Relu", [b.last])
        b.node("Gemm", [b.last, b.weight(m, k), b.weight(m, fan_in=k)], transB=1)
    return b.build()


MODELS = {
    # name: (builder, per-item input shape)
    "relu": (lambda: om.mlp((8, 16, 4), act="relu", seed=1), (8,)),
    "relu-other": (lambda: om.mlp((8, 16, 4), act="relu", seed=2), (8,)),
    "sigmoid": (lambda: om.mlp((8, 16, 4), act="Sigmoid", seed=3), (8,)),
    "maxpool": (lambda: om.conv_net(act="relu", pool="max", stride=2), (1, 8, 8)),
    "square-relu": (_square_then_relu, (8,)),
}


@cache
def _model(name: str) -> bytes:
    return MODELS[name][0]()


@cache
def _program(name: str) -> Program:
    return heinfer.compile(_model(name), calibration=om.random_input(MODELS[name][1], 64, seed=11))


def _x(name: str, n: int = 5, seed: int = 3) -> np.ndarray:
    return om.random_input(MODELS[name][1], n, seed=seed)


def _open(name: str, **server_kwargs) -> tuple[Client, Server, str]:
    prog = _program(name)
    client, server = Client(prog), Server(prog, **server_kwargs)
    return client, server, server.open_session(client.keys_message())


def _run(client: Client, server: Server, session: str, x: np.ndarray) -> np.ndarray:
    """One query through every client step."""
    reply = server.begin(client.query_message(session, x))
    while decode(reply).kind == "step":
        reply = server.resume(client.reply_message(reply))
    return client.decode_result(reply)


def _assert_good_query(
    name: str, client: Client, server: Server, session: str, seed: int = 9
) -> None:
    """The server still answers a good query correctly."""
    x = _x(name, 4, seed)
    got = _run(client, server, session, x)
    want = om.run_onnxruntime(_model(name), x)
    np.testing.assert_allclose(got, want, atol=_program(name).segments[-1].predicted_error)


def _reencode(message: bytes, payload: bytes | None = None, **header) -> bytes:
    msg = decode(message)
    return encode(
        Message(msg.kind, {**msg.header, **header}, msg.payload if payload is None else payload)
    )


def _batch(client: Client, payload: bytes) -> _native.CiphertextBatch:
    return _native.CiphertextBatch.from_bytes(client.params, payload, 1 << 30, 1 << 16)


def _raw(head: bytes, payload: bytes = b"", version: int = VERSION, magic: bytes = MAGIC) -> bytes:
    return magic + bytes([version]) + struct.pack("<I", len(head)) + head + payload


def test_the_programs_have_the_shapes_the_tests_need() -> None:
    relu, sq = _program("relu"), _program("square-relu")
    assert len(relu.steps) == 1 and relu.steps[0].hide_scale and not relu.needs_relin_key
    assert not _program("sigmoid").steps[0].hide_scale
    assert _program("maxpool").steps[0].grouping.kind == "maxpool"
    assert sq.needs_relin_key and len(sq.steps) == 1
    assert sq.segments[0].input_level > 0 and sq.segments[1].input_level == 0
    assert _program("relu-other").params == relu.params  # same parameters, other weights


# ---------------------------------------------------------------------------------- sessions and keys
def test_keys_for_another_program_are_refused() -> None:
    client = Client(_program("square-relu"))  # other parameters
    server = Server(_program("relu"))
    with pytest.raises(heinfer.ProtocolError, match="keys are for parameters"):
        server.open_session(client.keys_message())


def test_keys_with_a_forged_program_id_are_refused() -> None:
    client, server, _ = _open("relu")
    with pytest.raises(heinfer.ProtocolError, match="keys are for parameters"):
        server.open_session(_reencode(client.keys_message(), program_id="0" * 16))


def test_program_needing_no_relin_key_refuses_key_material() -> None:
    prog = _program("relu")
    assert not prog.needs_relin_key
    client, server, _ = _open("relu")
    rlk = _native.KeyGenerator(Client(_program("square-relu")).params).relin_key().to_bytes()
    for payload in (rlk, b"\x00", b"garbage"):
        with pytest.raises(heinfer.ProtocolError, match="no evaluation key"):
            server.open_session(_reencode(client.keys_message(), payload=payload))
    assert client.keys_message() == _reencode(client.keys_message(), payload=b"")  # keys: none


def test_program_needing_a_relin_key_refuses_its_absence_and_garbage() -> None:
    client, server, _ = _open("square-relu")
    with pytest.raises(heinfer.ProtocolError, match="relinearization key"):
        server.open_session(_reencode(client.keys_message(), payload=b""))
    good = decode(client.keys_message()).payload
    for payload in (b"garbage", good[: len(good) // 2], good[:-1]):
        with pytest.raises(BAD):
            server.open_session(_reencode(client.keys_message(), payload=payload))
    # a relinearization key of another parameter set, under this program's id
    other_prog = heinfer.compile(
        _model("square-relu"), calibration=om.random_input((8,), 64, seed=11), security=192
    )
    assert other_prog.params != _program("square-relu").params and other_prog.params["log_p"]
    other = _native.KeyGenerator(Client(other_prog).params).relin_key().to_bytes()
    with pytest.raises(BAD):
        server.open_session(_reencode(client.keys_message(), payload=other))
    _assert_good_query("square-relu", client, server, server.open_session(client.keys_message()))


def test_query_for_an_unknown_session_is_refused() -> None:
    client, server, session = _open("relu")
    query = client.query_message(session, _x("relu"))
    with pytest.raises(heinfer.ProtocolError, match="unknown session"):
        server.begin(_reencode(query, session="f" * 32))
    server.close_session(session)
    with pytest.raises(heinfer.ProtocolError, match="unknown session"):
        server.begin(query)
    session = server.open_session(client.keys_message())
    _assert_good_query("relu", client, server, session)


def test_too_many_sessions_are_refused() -> None:
    client, server, _ = _open("relu", max_sessions=2)
    server.open_session(client.keys_message())
    with pytest.raises(heinfer.ProtocolError, match="too many sessions"):
        server.open_session(client.keys_message())


def test_closing_a_session_forgets_its_queries() -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    reply = client.reply_message(step)
    server.close_session(session)
    with pytest.raises(heinfer.ProtocolError, match="no query"):
        server.resume(reply)


# ---------------------------------------------------------------------------------- queries
@pytest.mark.parametrize("items", [0, -1, 10**9])
def test_query_with_an_item_count_out_of_range_is_refused(items: int) -> None:
    client, server, session = _open("relu")
    with pytest.raises(heinfer.ProtocolError, match="items"):
        server.begin(_reencode(client.query_message(session, _x("relu")), items=items))
    _assert_good_query("relu", client, server, session)


@pytest.mark.parametrize("count", [0, 1, 7, 9, 40])
def test_query_with_the_wrong_number_of_ciphertexts_is_refused(count: int) -> None:
    client, server, session = _open("relu")
    query = client.query_message(session, _x("relu"))
    batch = _batch(client, decode(query).payload)
    assert len(batch) == 8
    payload = batch.take([i % 8 for i in range(count)]).to_bytes() if count else b""
    with pytest.raises(BAD):
        server.begin(_reencode(query, payload=payload))
    _assert_good_query("relu", client, server, session)


def test_query_at_the_wrong_level_or_scale_is_refused() -> None:
    client, server, session = _open("square-relu")
    prog = _program("square-relu")
    seg = prog.segments[0]
    values = np.zeros((seg.in_size, prog.slots), dtype=np.complex128)
    query = client.query_message(session, _x("square-relu"))
    for level, scale in (
        (seg.input_level - 1, seg.input_scale),
        (0, seg.input_scale),
        (seg.input_level, seg.input_scale * 2),
    ):
        batch = _native.encrypt_batch(client._kg, values, scale, level)
        with pytest.raises(heinfer.ProtocolError, match="level"):
            server.begin(_reencode(query, payload=batch.to_bytes()))
    _assert_good_query("square-relu", client, server, session)


def test_query_encrypted_for_other_parameters_is_refused() -> None:
    client, server, session = _open("relu")
    other = Client(_program("square-relu"))
    foreign = decode(other.query_message("x", _x("square-relu"))).payload
    with pytest.raises(BAD):
        server.begin(_reencode(client.query_message(session, _x("relu")), payload=foreign))
    _assert_good_query("relu", client, server, session)


def test_client_refuses_inputs_of_the_wrong_shape_or_count() -> None:
    client, _, _ = _open("relu")
    prog = _program("relu")
    for x in (
        np.zeros((3, 9)),
        np.zeros(8),
        np.zeros((3, 8, 1)),
        np.zeros((0, 8)),
        np.zeros((prog.batch_capacity + 1, 8)),
    ):
        with pytest.raises(heinfer.ProtocolError):
            client.query_message("s", x)


# ---------------------------------------------------------------------------------- replies
def test_reply_for_the_wrong_step_is_refused_and_the_query_survives() -> None:
    client, server, session = _open("relu")
    x = _x("relu")
    step = server.begin(client.query_message(session, x))
    reply = client.reply_message(step)
    for k in (1, -1, 5):
        with pytest.raises(heinfer.ProtocolError, match="step"):
            server.resume(_reencode(reply, step=k))
    got = client.decode_result(server.resume(reply))  # the right reply still completes it
    np.testing.assert_allclose(
        got,
        om.run_onnxruntime(_model("relu"), x),
        atol=_program("relu").segments[-1].predicted_error,
    )


def test_reply_for_an_unknown_query_is_refused() -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    for qid in ("0" * 32, "", "x" * 1000):
        with pytest.raises(heinfer.ProtocolError, match="no query"):
            server.resume(_reencode(reply, query=qid))
    server.resume(reply)


def test_replayed_reply_is_refused() -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    client.decode_result(server.resume(reply))
    with pytest.raises(heinfer.ProtocolError, match="no query"):
        server.resume(reply)
    _assert_good_query("relu", client, server, session)


def test_replies_of_two_interleaved_queries_out_of_order() -> None:
    """Two queries in flight on one server: replying to the second first works (each reply
    names its query), and each answer is right."""
    name = "relu"
    c1, server, s1 = _open(name)
    c2 = Client(_program(name))
    s2 = server.open_session(c2.keys_message())
    x1, x2 = _x(name, 3, seed=1), _x(name, 3, seed=2)
    step1 = server.begin(c1.query_message(s1, x1))
    step2 = server.begin(c2.query_message(s2, x2))
    r2 = server.resume(c2.reply_message(step2))
    r1 = server.resume(c1.reply_message(step1))
    tol = _program(name).segments[-1].predicted_error
    np.testing.assert_allclose(c2.decode_result(r2), om.run_onnxruntime(_model(name), x2), atol=tol)
    np.testing.assert_allclose(c1.decode_result(r1), om.run_onnxruntime(_model(name), x1), atol=tol)


@pytest.mark.parametrize("count", [0, 1, 15, 17, 32])
def test_reply_with_the_wrong_number_of_ciphertexts_is_refused(count: int) -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    batch = _batch(client, decode(reply).payload)
    assert len(batch) == 16
    payload = batch.take([i % 16 for i in range(count)]).to_bytes() if count else b""
    with pytest.raises(BAD):
        server.resume(_reencode(reply, payload=payload))
    _assert_good_query("relu", client, server, session)


def test_reply_at_the_wrong_level_or_scale_is_refused() -> None:
    client, server, session = _open("square-relu")
    prog = _program("square-relu")
    seg = prog.segments[1]
    assert seg.input_level == 0
    values = np.zeros((seg.in_size, prog.slots), dtype=np.complex128)
    for level, scale in (
        (1, seg.input_scale),
        (prog.segments[0].input_level, seg.input_scale),
        (0, seg.input_scale * 4),
    ):
        step = server.begin(client.query_message(session, _x("square-relu")))
        reply = client.reply_message(step)
        bad = _native.encrypt_batch(client._kg, values, scale, level)
        with pytest.raises(heinfer.ProtocolError, match="level"):
            server.resume(_reencode(reply, payload=bad.to_bytes()))
    _assert_good_query("square-relu", client, server, session)


def test_reply_with_a_corrupted_payload_is_refused() -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    payload = bytearray(decode(reply).payload)
    for cut in (payload[:10], payload[: len(payload) // 2], payload[:-1], b"\xff" * 64):
        with pytest.raises(BAD):
            server.resume(_reencode(reply, payload=bytes(cut)))
        reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    _assert_good_query("relu", client, server, session)


# ---------------------------------------------------------------------------------- malformed bytes
def _entry_points():
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    return {
        "open_session": server.open_session,
        "begin": server.begin,
        "resume": server.resume,
        "reply_message": client.reply_message,
        "decode_result": client.decode_result,
    }, (client, server, session, step)


@cache
def _good_messages() -> dict[str, bytes]:
    client, server, session = _open("relu")
    query = client.query_message(session, _x("relu"))
    step = server.begin(query)
    reply = client.reply_message(step)
    result = server.resume(reply)
    return {
        "keys": client.keys_message(),
        "query": query,
        "step": step,
        "reply": reply,
        "result": result,
    }


MALFORMED = {
    "empty": b"",
    "random": bytes(range(256)) * 3,
    "bad-magic": _raw(b'{"kind": "query", "session": "s", "items": 1}', magic=b"HEMZ"),
    "wrong-version": _raw(b'{"kind": "query", "session": "s", "items": 1}', version=2),
    "header-length-beyond-end": MAGIC + bytes([VERSION]) + struct.pack("<I", 1000) + b"{}",
    "header-length-huge": MAGIC + bytes([VERSION]) + struct.pack("<I", 0xFFFFFFFF) + b"{}",
    "header-not-json": _raw(b"{kind: query}"),
    "header-not-utf8": _raw(b"\xff\xfe\xfd"),
    "header-list": _raw(b"[1, 2, 3]"),
    "header-string": _raw(b'"query"'),
    "header-null": _raw(b"null"),
    "no-kind": _raw(b'{"session": "s", "items": 1}'),
    "unknown-kind": _raw(b'{"kind": "bootstrap"}'),
    "kind-number": _raw(b'{"kind": 3}'),
    "missing-field": _raw(b'{"kind": "query", "session": "s"}'),
    "items-string": _raw(b'{"kind": "query", "session": "s", "items": "3"}'),
    "items-bool": _raw(b'{"kind": "query", "session": "s", "items": true}'),
    "items-float": _raw(b'{"kind": "query", "session": "s", "items": 3.0}'),
    "session-number": _raw(b'{"kind": "query", "session": 7, "items": 1}'),
    "step-string": _raw(b'{"kind": "reply", "query": "q", "step": "0"}'),
    "group-sizes-dict": _raw(b'{"kind": "step", "query": "q", "step": 0, "group_sizes": {}}'),
}


@pytest.mark.parametrize("case", list(MALFORMED))
@pytest.mark.parametrize(
    "entry", ["open_session", "begin", "resume", "reply_message", "decode_result"]
)
def test_malformed_messages_are_protocol_errors(case: str, entry: str) -> None:
    fns, _ = _parties()
    with pytest.raises(heinfer.ProtocolError):
        fns[entry](MALFORMED[case])


@pytest.mark.parametrize(
    ("entry", "kinds"),
    [
        ("open_session", ["query", "step", "reply", "result"]),
        ("begin", ["keys", "step", "reply", "result"]),
        ("resume", ["keys", "query", "step", "result"]),
        ("reply_message", ["keys", "query", "reply", "result"]),
        ("decode_result", ["keys", "query", "step", "reply"]),
    ],
)
def test_message_of_the_wrong_kind_is_a_protocol_error(entry: str, kinds: list[str]) -> None:
    fns, _ = _parties()
    for kind in kinds:
        with pytest.raises(heinfer.ProtocolError, match="expected"):
            fns[entry](_good_messages()[kind])


@pytest.mark.parametrize("kind", ["keys", "query", "step", "reply", "result"])
def test_truncated_messages_are_refused(kind: str) -> None:
    data = _good_messages()[kind]
    head_end = 9 + struct.unpack("<I", data[5:9])[0]
    fns, _ = _parties()
    entry = {
        "keys": "open_session",
        "query": "begin",
        "step": "reply_message",
        "reply": "resume",
        "result": "decode_result",
    }[kind]
    for n in sorted(
        {
            *range(min(head_end + 1, 60)),
            head_end - 1,
            *range(head_end, len(data), max(1, len(data) // 23)),
        }
    ):
        if n == len(data) or (kind == "keys" and n == head_end):
            continue
        # inside the header: a protocol error; inside the payload: the payload decoder refuses
        expected = heinfer.ProtocolError if n < head_end else BAD
        with pytest.raises(expected):
            fns[entry](data[:n])


def test_non_bytes_messages_are_protocol_errors() -> None:
    fns, _ = _parties()
    for fn in fns.values():
        for obj in ("HEMS", None, 12, [1]):
            with pytest.raises(heinfer.ProtocolError, match="bytes"):
                fn(obj)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300))
def test_random_bytes_are_protocol_errors(data: bytes) -> None:
    fns, _ = _parties()
    for fn in fns.values():
        with pytest.raises(BAD):
            fn(data)
        if not data.startswith(MAGIC):
            with pytest.raises(heinfer.ProtocolError):
                fn(data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_HEADER_FIELDS = ["program_id", "session", "items", "query", "step", "group_sizes"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["keys", "query", "step", "reply", "result", "other"])
    | st.text(max_size=5)
    | st.integers()
    | st.none(),
    fields=st.dictionaries(
        st.sampled_from(_HEADER_FIELDS) | st.text(max_size=5), _JSON, max_size=5
    ),
    payload=st.binary(max_size=64),
)
def test_random_headers_are_refused(kind, fields: dict, payload: bytes) -> None:
    """Any JSON header with a hashable ``kind``: every entry point refuses it (well-formed
    headers then fail on the unknown session/query or on the payload)."""
    sizes = fields.get("group_sizes")
    # non-integer group sizes are a known client bug (test_client_refuses_non_integer_group_sizes)
    assume(not (isinstance(sizes, list) and any(not isinstance(s, int) for s in sizes)))
    data = _raw(json.dumps({**fields, "kind": kind}).encode(), payload)
    fns, _ = _parties()
    for fn in fns.values():
        with pytest.raises(BAD):
            fn(data)


@cache
def _parties():
    """One client and server shared by the fuzz tests (built once)."""
    return _entry_points()


@pytest.mark.parametrize("head", [b'{"kind": ["query"]}', b'{"kind": {"a": 1}}'])
def test_unhashable_kind_is_a_protocol_error(head: bytes) -> None:
    with pytest.raises(heinfer.ProtocolError):
        decode(_raw(head))


def test_deeply_nested_header_is_a_protocol_error() -> None:
    with pytest.raises(heinfer.ProtocolError):
        decode(_raw(b"[" * 100_000 + b"]" * 100_000))


# ---------------------------------------------------------------------------------- what the client sees
def _step_values(client: Client, step: bytes, n: int) -> np.ndarray:
    """The values of a step message as the client decrypts them: ``(count, n)``."""
    batch = _batch(client, decode(step).payload)
    return client._decrypt(batch, n)


def _pre_activations(name: str, x: np.ndarray) -> np.ndarray:
    """The plain values entering the first client step: ``(count, n)``."""
    g = fold_linear(load_onnx(_model(name)))
    return g.ops[0].apply(x.reshape(len(x), -1)).T


def _match(sent: np.ndarray, plain: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """For every sent row, the plain row it is a positive multiple of, and the factor."""
    index, factor = [], []
    for v in sent:
        r = plain @ v / np.einsum("ij,ij->i", plain, plain)
        resid = np.abs(plain * r[:, None] - v).max(axis=1)
        ok = np.flatnonzero((resid < tol) & (r > 0))
        assert len(ok) == 1, f"{len(ok)} plain rows match a sent row"
        index.append(ok[0])
        factor.append(r[ok[0]])
    return np.array(index), np.array(factor)


def test_relu_step_values_are_permuted_and_positively_scaled() -> None:
    name = "relu"
    prog = _program(name)
    R = prog.hide_range
    assert R > 1 and prog.steps[0].hide_scale
    client, server, session = _open(name)
    x = _x(name, 8, seed=21)
    plain = _pre_activations(name, x)
    perms = []
    for _ in range(2):
        step = server.begin(client.query_message(session, x))
        sent = _step_values(client, step, len(x))
        assert sent.shape == plain.shape == (16, 8)
        assert not np.allclose(sent, plain, atol=1e-2), "values sent in order and unscaled"
        index, factor = _match(sent, plain, tol=1e-3)
        assert sorted(index) == list(range(16)), "not a permutation"
        assert list(index) != list(range(16))
        assert np.all(factor >= 1 / R - 1e-6) and np.all(factor <= R + 1e-6), factor
        assert np.abs(np.log(factor)).max() > 0.05, "no hiding factor applied"
        # the signs are the plain signs (ReLU is exact under positive scaling)
        np.testing.assert_array_equal(
            np.sign(sent[np.abs(sent) > 1e-3]), np.sign(plain[index][np.abs(sent) > 1e-3])
        )
        perms.append(index)
        # and the answer is unaffected
        got = client.decode_result(server.resume(client.reply_message(step)))
        np.testing.assert_allclose(
            got, om.run_onnxruntime(_model(name), x), atol=prog.segments[-1].predicted_error
        )
    assert list(perms[0]) != list(perms[1]), "the permutation is not fresh per query"


def test_maxpool_step_shares_one_factor_per_pooled_component() -> None:
    name = "maxpool"
    prog = _program(name)
    st_ = prog.steps[0]
    R = prog.hide_range
    assert st_.hide_scale
    client, server, session = _open(name)
    x = _x(name, 8, seed=22)
    plain = _pre_activations(name, x)
    step = server.begin(client.query_message(session, x))
    sizes = decode(step).header["group_sizes"]
    windows = [[int(k) for k in row if k >= 0] for row in st_.grouping.groups]
    assert sorted(sizes) == sorted(len(w) for w in windows)
    sent = _step_values(client, step, len(x))
    assert len(sent) == sum(sizes)
    index, factor = _match(sent, plain, tol=1e-3)
    assert np.all(factor >= 1 / R - 1e-6) and np.all(factor <= R + 1e-6)
    # values of one window arrive together and share the factor of their component
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert sorted(tuple(sorted(index[s : s + n])) for s, n in zip(starts, sizes)) == sorted(
        tuple(sorted(w)) for w in windows
    )
    for comp in np.unique(st_.components):
        f = factor[st_.components[index] == comp]
        np.testing.assert_allclose(f, f[0], rtol=1e-4)
    assert np.abs(np.log(factor)).max() > 0.01
    got = client.decode_result(server.resume(client.reply_message(step)))
    np.testing.assert_allclose(
        got, om.run_onnxruntime(_model(name), x), atol=prog.segments[-1].predicted_error
    )


def test_sigmoid_step_is_permuted_but_not_scaled() -> None:
    """Sigmoid is not positively homogeneous: its inputs go out unscaled (only permuted)."""
    name = "sigmoid"
    client, server, session = _open(name)
    x = _x(name, 8, seed=23)
    plain = _pre_activations(name, x)
    step = server.begin(client.query_message(session, x))
    sent = _step_values(client, step, len(x))
    index, factor = _match(sent, plain, tol=1e-3)
    assert sorted(index) == list(range(16)) and list(index) != list(range(16))
    np.testing.assert_allclose(factor, 1.0, atol=1e-4)


# ---------------------------------------------------------------------------------- secrets
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_client_cannot_be_pickled(protocol: int) -> None:
    client = Client(_program("relu"))
    with pytest.raises(TypeError, match="secret key"):
        pickle.dumps(client, protocol=protocol)


@pytest.mark.parametrize("fn", [copy.copy, copy.deepcopy])
def test_client_cannot_be_copied(fn) -> None:
    with pytest.raises(TypeError):
        fn(Client(_program("relu")))


def test_client_repr_shows_no_key_material() -> None:
    client = Client(_program("relu"))
    assert repr(client).startswith("Client(params_id=")
    assert len(repr(client)) < 60


def test_server_holds_no_secret_key() -> None:
    client, server, session = _open("square-relu")
    _run(client, server, session, _x("square-relu", 2))
    secret_types = (_native.SecretKey, _native.KeyGenerator, _native.Decryptor)

    def walk(obj, depth=0):
        if depth > 4:
            return
        assert not isinstance(obj, secret_types), type(obj)
        if isinstance(obj, dict):
            for v in obj.values():
                walk(v, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            for v in vars(obj).values():
                walk(v, depth + 1)

    walk(server)


# ---------------------------------------------------------------------------------- client robustness
def test_client_refuses_a_step_that_does_not_exist() -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    for k in (1, -1, 99):
        with pytest.raises(heinfer.ProtocolError, match="step"):
            client.reply_message(_reencode(step, step=k))


def test_client_refuses_a_step_with_the_wrong_value_count() -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    batch = _batch(client, decode(step).payload)
    with pytest.raises(BAD):
        client.reply_message(_reencode(step, payload=batch.take(list(range(15))).to_bytes()))
    with pytest.raises(BAD):
        client.reply_message(_reencode(step, payload=batch.take(list(range(16)) + [0]).to_bytes()))


def test_client_refuses_group_sizes_for_an_elementwise_step() -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    with pytest.raises(heinfer.ProtocolError):
        client.reply_message(_reencode(step, group_sizes=[8, 8]))


def test_client_refuses_a_maxpool_step_without_or_with_wrong_group_sizes() -> None:
    client, server, session = _open("maxpool")
    step = server.begin(client.query_message(session, _x("maxpool")))
    sizes = decode(step).header["group_sizes"]
    for bad in (
        [],
        [sum(sizes)],
        sizes[:-1] + [sizes[-1] + 1],
        [0] + sizes,
        [-1] + sizes[1:] + [sizes[0] + 1],
    ):
        with pytest.raises(BAD):
            client.reply_message(_reencode(step, group_sizes=bad))


def test_client_refuses_a_result_with_the_wrong_value_count() -> None:
    client, server, session = _open("relu")
    result = server.resume(
        client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    )
    batch = _batch(client, decode(result).payload)
    with pytest.raises(BAD):
        client.decode_result(_reencode(result, payload=batch.take([0, 1, 2]).to_bytes()))


@pytest.mark.parametrize("sizes", [["a"], [1.5], [None]])
def test_client_refuses_non_integer_group_sizes(sizes: list) -> None:
    client, server, session = _open("maxpool")
    step = server.begin(client.query_message(session, _x("maxpool")))
    with pytest.raises(heinfer.ProtocolError):
        client.reply_message(_reencode(step, group_sizes=sizes))


@pytest.mark.parametrize("kind", ["step", "result"])
def test_fresh_client_refuses_messages_for_a_query_it_never_sent(kind: str) -> None:
    msgs = _good_messages()
    fresh = Client(_program("relu"))
    with pytest.raises(heinfer.ProtocolError):
        if kind == "step":
            fresh.reply_message(msgs["step"])
        else:
            fresh.decode_result(msgs["result"])


@pytest.mark.parametrize("name", ["relu", "square-relu"])
def test_one_client_with_two_queries_in_flight(name: str) -> None:
    client, server, session = _open(name)
    x1, x2 = _x(name, 2, seed=1), _x(name, 5, seed=2)
    q1, q2 = client.query_message(session, x1), client.query_message(session, x2)
    m1, m2 = server.begin(q1), server.begin(q2)
    while decode(m1).kind == "step":
        m1 = server.resume(client.reply_message(m1))
    while decode(m2).kind == "step":
        m2 = server.resume(client.reply_message(m2))
    y1, y2 = client.decode_result(m1), client.decode_result(m2)
    assert y1.shape[0] == 2 and y2.shape[0] == 5
