"""The client/server protocol driven by hand (``heinfer.protocol``).

Every message the server receives is untrusted: keys for another program, queries for an
unknown session, replies out of order, for an unknown query, with the wrong number of
ciphertexts or at the wrong level, and malformed bytes are refused with
:class:`heinfer.ProtocolError` (or :class:`heinfer.SerializationError` when the ciphertext
payload itself does not decode) — and the server keeps answering good queries afterwards.
Messages are protobuf (:mod:`heinfer.protocol.messages`): malformed wire bytes, wrong kinds,
bad ids and random fields are refused by every entry point. The client-aided steps send the
values as they are (no permutation, no factor: that hiding protected nothing and was removed).
"""

from __future__ import annotations

import copy
import pickle
from functools import cache

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from heinfer import _native
from heinfer.compiler import fold_linear, load_onnx
from heinfer.program import Program
from heinfer.protocol import Client, Server
from heinfer.protocol.layouts import decrypt_segment_output
from heinfer.protocol.messages import KINDS, decode, encode, keys_id
from protocol.forge import ANY_ROUNDING
from protocol.forge import fields as _fields
from protocol.forge import payload as _payload
from protocol.forge import reencode as _reencode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BAD = (heinfer.ProtocolError, heinfer.SerializationError)


# ---------------------------------------------------------------------------------- programs
MODELS = {
    # name: (builder, per-item input shape)
    "relu": (lambda: om.mlp((8, 16, 4), act="relu", seed=1), (8,)),
    "relu-other": (lambda: om.mlp((8, 16, 4), act="relu", seed=2), (8,)),
    "sigmoid": (lambda: om.mlp((8, 16, 4), act="Sigmoid", seed=3), (8,)),
    "maxpool": (lambda: om.conv_net(act="relu", pool="max", stride=2), (1, 8, 8)),
    "square-relu": (om.squares_then_relu, (8,)),
}


@cache
def _model(name: str) -> bytes:
    return MODELS[name][0]()


@cache
def _program(name: str) -> Program:
    return heinfer.compile(_model(name), calibration=om.random_input(MODELS[name][1], 64, seed=11))


def _tol(prog: Program) -> float:
    """The predicted error of the outputs plus what the client's release adds (Gaussian noise
    of half the stated precision, then rounding to it: a few precisions at most)."""
    return prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision


def _x(name: str, n: int = 5, seed: int = 3) -> np.ndarray:
    return om.random_input(MODELS[name][1], n, seed=seed)


def _open(name: str, **server_kwargs) -> tuple[Client, Server, str]:
    prog = _program(name)
    client, server = Client(prog.public()), Server(prog, **server_kwargs)
    return client, server, server.open_session(client.keys_message())


def _kind(message: bytes) -> str:
    return decode(message)[0]


def _run(client: Client, server: Server, session: str, x: np.ndarray) -> np.ndarray:
    """One query through every client step."""
    reply = server.begin(client.query_message(session, x))
    while _kind(reply) == "step":
        reply = server.resume(client.reply_message(reply))
    return client.decode_result(reply)


def _assert_good_query(
    name: str, client: Client, server: Server, session: str, seed: int = 9
) -> None:
    """The server still answers a good query correctly."""
    x = _x(name, 4, seed)
    got = _run(client, server, session, x)
    want = om.run_onnxruntime(_model(name), x)
    np.testing.assert_allclose(got, want, atol=_tol(_program(name)))




def _batch(client: Client, payload: bytes) -> _native.CiphertextBatch:
    return _native.CiphertextBatch.from_bytes(client.params, payload, 1 << 30, 1 << 16, ANY_ROUNDING)


def test_the_programs_have_the_shapes_the_tests_need() -> None:
    relu, sq = _program("relu"), _program("square-relu")
    assert len(relu.steps) == 1 and [f.kind for f in relu.steps[0].functions] == ["relu"]
    assert not relu.needs_relin_key
    assert [f.kind for f in _program("sigmoid").steps[0].functions] == ["sigmoid"]
    assert "maxpool" in [f.kind for f in _program("maxpool").steps[0].functions]
    assert sq.needs_relin_key and len(sq.steps) == 1
    assert sq.segments[0].input_level > 0 and sq.segments[1].input_level == 0
    assert _program("relu-other").params == relu.params  # same parameters, other weights
    assert _program("relu-other").id != relu.id


# ---------------------------------------------------------------------------------- sessions and keys
def test_keys_for_another_program_are_refused() -> None:
    client = Client(_program("square-relu").public())  # other parameters (and a relin key)
    server = Server(_program("relu"))
    with pytest.raises(heinfer.ProtocolError, match="keys are for program|exceeds the 1024"):
        server.open_session(client.keys_message())
    # same parameters, other weights: another program id
    client = Client(_program("relu-other").public())
    with pytest.raises(heinfer.ProtocolError, match="keys are for program"):
        server.open_session(client.keys_message())


def test_keys_with_a_forged_program_id_are_refused() -> None:
    client, server, _ = _open("relu")
    with pytest.raises(heinfer.ProtocolError, match="keys are for program"):
        server.open_session(_reencode(client.keys_message(), program_id="0" * 16))


def test_server_refuses_a_public_program() -> None:
    with pytest.raises(heinfer.ProtocolError, match="full program"):
        Server(_program("relu").public())


def test_program_needing_no_relin_key_refuses_key_material() -> None:
    prog = _program("relu")
    assert not prog.needs_relin_key and not prog.rotation_steps
    client, server, _ = _open("relu")
    rlk = _native.KeyGenerator(Client(_program("square-relu")).params).relin_key().to_bytes()
    # a real key does not even fit the size limit of a program that needs none
    for payload, match in (
        (rlk, "exceeds the"),
        (b"\x00", "exactly the keys"),
        (b"garbage", "exactly the keys"),
    ):
        with pytest.raises(heinfer.ProtocolError, match=match):
            server.open_session(_reencode(client.keys_message(), relin_key=payload))
        with pytest.raises(heinfer.ProtocolError, match=match):
            server.open_session(_reencode(client.keys_message(), galois_keys=payload))
    keys = _fields(client.keys_message())  # keys: none
    assert keys["relin_key"] == b"" and keys["galois_keys"] == b""


def test_program_needing_a_relin_key_refuses_its_absence_and_garbage() -> None:
    client, server, _ = _open("square-relu")
    with pytest.raises(heinfer.ProtocolError, match="exactly the keys"):
        server.open_session(_reencode(client.keys_message(), relin_key=b""))
    good = _fields(client.keys_message())["relin_key"]
    for payload in (b"garbage", good[: len(good) // 2], good[:-1]):
        with pytest.raises(BAD):
            server.open_session(_reencode(client.keys_message(), relin_key=payload))
    # a relinearization key of another parameter set, under this program's id
    other_prog = heinfer.compile(
        _model("square-relu"), calibration=om.random_input((8,), 64, seed=11), security=192
    )
    assert other_prog.params != _program("square-relu").params and other_prog.params["log_p"]
    other = _native.KeyGenerator(Client(other_prog).params).relin_key().to_bytes()
    with pytest.raises(BAD):
        server.open_session(_reencode(client.keys_message(), relin_key=other))
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
@pytest.mark.parametrize("items", [0, 2**32 - 1, 10**9])
def test_query_with_an_item_count_out_of_range_is_refused(items: int) -> None:
    client, server, session = _open("relu")
    with pytest.raises(heinfer.ProtocolError, match="items"):
        server.begin(_reencode(client.query_message(session, _x("relu")), items=items))
    _assert_good_query("relu", client, server, session)


@pytest.mark.parametrize("count", [0, 1, 7, 9, 40])
def test_query_with_the_wrong_number_of_ciphertexts_is_refused(count: int) -> None:
    client, server, session = _open("relu")
    query = client.query_message(session, _x("relu"))
    batch = _batch(client, _payload(query))
    assert len(batch) == 8
    payload = batch.take([i % 8 for i in range(count)]).to_bytes() if count else b""
    with pytest.raises(BAD):
        server.begin(_reencode(query, ciphertexts=payload))
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
        batch = _native.encrypt_batch(client._session_key.kg, values, scale, level)
        with pytest.raises(heinfer.ProtocolError, match="level"):
            server.begin(_reencode(query, ciphertexts=batch.to_bytes()))
    _assert_good_query("square-relu", client, server, session)


def test_query_encrypted_for_other_parameters_is_refused() -> None:
    client, server, session = _open("relu")
    other = Client(_program("square-relu"))
    other_session = keys_id(other.keys_message()) + "ab"  # a session id as a server would give
    foreign = _payload(other.query_message(other_session, _x("square-relu")))
    with pytest.raises(BAD):
        server.begin(_reencode(client.query_message(session, _x("relu")), ciphertexts=foreign))
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
        np.zeros((3, 8), dtype=complex),  # its imaginary parts were dropped with a numpy warning
    ):
        with pytest.raises(heinfer.ProtocolError):
            client.query_message("ab", x)


# ---------------------------------------------------------------------------------- replies
def test_reply_for_the_wrong_step_is_refused_and_the_query_survives() -> None:
    client, server, session = _open("relu")
    x = _x("relu")
    step = server.begin(client.query_message(session, x))
    reply = client.reply_message(step)
    for k in (1, 5, 2**32 - 1):
        with pytest.raises(heinfer.ProtocolError, match="step"):
            server.resume(_reencode(reply, step=k))
    got = client.decode_result(server.resume(reply))  # the right reply still completes it
    np.testing.assert_allclose(
        got, om.run_onnxruntime(_model("relu"), x), atol=_tol(_program("relu"))
    )


def test_reply_for_an_unknown_query_is_refused() -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    with pytest.raises(heinfer.ProtocolError, match="no query"):
        server.resume(_reencode(reply, query="0" * 32))
    for qid in ("", "x" * 10, "a" * 1000):  # not even a query id
        with pytest.raises(heinfer.ProtocolError, match="hex id"):
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
    tol = _tol(_program(name))
    np.testing.assert_allclose(c2.decode_result(r2), om.run_onnxruntime(_model(name), x2), atol=tol)
    np.testing.assert_allclose(c1.decode_result(r1), om.run_onnxruntime(_model(name), x1), atol=tol)


@pytest.mark.parametrize("count", [0, 1, 15, 17, 32])
def test_reply_with_the_wrong_number_of_ciphertexts_is_refused(count: int) -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    batch = _batch(client, _payload(reply))
    assert len(batch) == 16
    payload = batch.take([i % 16 for i in range(count)]).to_bytes() if count else b""
    with pytest.raises(BAD):
        server.resume(_reencode(reply, ciphertexts=payload))
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
        bad = _native.encrypt_batch(client._session_key.kg, values, scale, level)
        # at a higher level the reply no longer fits the size the program allows
        with pytest.raises(heinfer.ProtocolError, match="level|exceeds the"):
            server.resume(_reencode(reply, ciphertexts=bad.to_bytes()))
    _assert_good_query("square-relu", client, server, session)


def test_reply_with_a_corrupted_payload_is_refused() -> None:
    client, server, session = _open("relu")
    reply = client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    payload = bytearray(_payload(reply))
    for cut in (payload[:10], payload[: len(payload) // 2], payload[:-1], b"\xff" * 64):
        with pytest.raises(BAD):
            server.resume(_reencode(reply, ciphertexts=bytes(cut)))
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


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _vi(field: int, value: int) -> bytes:
    """A varint protobuf field."""
    return _varint(field << 3) + _varint(value)


# kinds: keys=1, query=2, step=3, reply=4, result=5 (proto/heinfer/v1/protocol.proto)
_Q = _ld(1, b"ab") + _ld(2, b"cd") + _vi(3, 1)
MALFORMED = {
    "empty": b"",
    "random": bytes(range(256)) * 3,
    "no-kind-unknown-field": _ld(9, b"x"),
    "kind-as-varint": _vi(2, 5),
    "length-beyond-end": _varint(2 << 3 | 2) + _varint(1000) + _Q,
    "length-huge": _varint(2 << 3 | 2) + _varint(2**63) + _Q,
    "length-truncated-varint": b"\x12\x80",
    "varint-too-long": b"\x12" + b"\xff" * 11 + b"\x01",
    "end-group-without-start": b"\x0c",
    "deeply-nested-groups": b"\x0b" * 100_000,
    "session-empty": _ld(2, _ld(2, b"cd") + _vi(3, 1)),
    "session-not-hex": _ld(2, _ld(1, b"session") + _ld(2, b"cd") + _vi(3, 1)),
    "session-not-utf8": _ld(2, _ld(1, b"\xff\xfe") + _ld(2, b"cd") + _vi(3, 1)),
    "session-too-long": _ld(2, _ld(1, b"a" * 65) + _ld(2, b"cd") + _vi(3, 1)),
    "session-upper-case": _ld(2, _ld(1, b"AB") + _ld(2, b"cd") + _vi(3, 1)),
    "ref-missing": _ld(2, _ld(1, b"ab") + _vi(3, 1)),
    "items-as-bytes": _ld(2, _ld(1, b"ab") + _ld(2, b"cd") + _ld(3, b"\x01")),
    "step-query-missing": _ld(3, _ld(2, b"cd") + _vi(3, 0)),
    "reply-query-not-hex": _ld(4, _ld(1, b"q") + _vi(2, 0)),
    "result-ref-missing": _ld(5, _ld(1, b"ab")),
    "keys-program-id-missing": _ld(1, _ld(2, b"\x00")),
    "keys-program-id-too-long": _ld(1, _ld(1, b"a" * 1000)),
    "field-wrong-wire-type": _ld(2, _vi(1, 7) + _ld(2, b"cd") + _vi(3, 1)),
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
        # refused by its kind, or first by the size limit of the kind expected
        with pytest.raises(heinfer.ProtocolError, match="expected a|exceeds the"):
            fns[entry](_good_messages()[kind])


@pytest.mark.parametrize("kind", ["keys", "query", "step", "reply", "result"])
def test_truncated_messages_are_refused(kind: str) -> None:
    """A protobuf message cut anywhere no longer parses (its outer length overruns): a
    protocol error before any ciphertext is decoded."""
    data = _good_messages()[kind]
    fns, _ = _parties()
    entry = {
        "keys": "open_session",
        "query": "begin",
        "step": "reply_message",
        "reply": "resume",
        "result": "decode_result",
    }[kind]
    for n in sorted(
        {*range(min(len(data), 60)), len(data) - 1, *range(0, len(data), max(1, len(data) // 23))}
    ):
        with pytest.raises(heinfer.ProtocolError):
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


_HEXISH = st.text(alphabet="0123456789abcdef", min_size=0, max_size=70) | st.text(max_size=8)


@st.composite
def _random_message(draw) -> bytes:
    """A well-formed protobuf message of any kind with random field values."""
    from heinfer.protocol.messages import pb

    kind = draw(st.sampled_from(KINDS))
    fields = {}
    for f in getattr(pb, kind.capitalize()).DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue
        if f.type == f.TYPE_STRING:
            fields[f.name] = draw(_HEXISH)
        elif f.type == f.TYPE_BYTES:
            fields[f.name] = draw(st.binary(max_size=64))
        else:
            fields[f.name] = draw(st.integers(0, 2**32 - 1))
    return encode(kind, **fields)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_random_message())
def test_random_well_formed_messages_are_refused(data: bytes) -> None:
    """Any message of any kind with random ids, counters and payloads: every entry point
    refuses it (well-formed ones then fail on the program id, the unknown session, query or
    reference, or on the payload)."""
    fns, _ = _parties()
    for fn in fns.values():
        with pytest.raises(BAD):
            fn(data)


@cache
def _parties():
    """One client and server shared by the fuzz tests (built once)."""
    return _entry_points()


# ---------------------------------------------------------------------------------- what the client sees
def _pre_activations(name: str, x: np.ndarray) -> np.ndarray:
    """The plain values entering the first client step: ``(n, count)``."""
    g = fold_linear(load_onnx(_model(name)))
    return g.ops[0].apply(x.reshape(len(x), -1))


@pytest.mark.parametrize("name", ["relu", "sigmoid", "maxpool"])
def test_step_values_arrive_unpermuted_and_unscaled(name: str) -> None:
    """The client-aided hiding (random factors and permutations) is gone: the values of a
    step are the plain pre-activations, in order, at their own scale."""
    prog = _program(name)
    client, server, session = _open(name)
    x = _x(name, 8, seed=21)
    plain = _pre_activations(name, x)
    step = server.begin(client.query_message(session, x))
    q = client._queries[decode(step)[1].ref]
    batch = _batch(client, _payload(step))
    sent = decrypt_segment_output(q.key.dec, prog.segments[0], batch, len(x))
    assert sent.shape == plain.shape == (8, prog.steps[0].in_size)
    np.testing.assert_allclose(sent, plain, atol=prog.meta["predicted_error"][0])
    got = client.decode_result(server.resume(client.reply_message(step)))
    np.testing.assert_allclose(got, om.run_onnxruntime(_model(name), x), atol=_tol(prog))


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
    assert repr(client).startswith("Client(program=")
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
@pytest.mark.parametrize("k", [1, 99, 2**32 - 1])
def test_client_refuses_a_step_that_does_not_exist(k: int) -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    with pytest.raises(heinfer.ProtocolError, match="step"):
        client.reply_message(_reencode(step, step=k))


@pytest.mark.parametrize("take", [list(range(15)), list(range(16)) + [0], []])
def test_client_refuses_a_step_with_the_wrong_value_count(take: list) -> None:
    client, server, session = _open("relu")
    step = server.begin(client.query_message(session, _x("relu")))
    batch = _batch(client, _payload(step))
    assert len(batch) == 16
    payload = batch.take(take).to_bytes() if take else b""
    with pytest.raises(BAD):
        client.reply_message(_reencode(step, ciphertexts=payload))


def test_client_refuses_a_result_with_the_wrong_value_count() -> None:
    client, server, session = _open("relu")
    result = server.resume(
        client.reply_message(server.begin(client.query_message(session, _x("relu"))))
    )
    batch = _batch(client, _payload(result))
    with pytest.raises(BAD):
        client.decode_result(_reencode(result, ciphertexts=batch.take([0, 1, 2]).to_bytes()))


@pytest.mark.parametrize("kind", ["step", "result"])
def test_fresh_client_refuses_messages_for_a_query_it_never_sent(kind: str) -> None:
    msgs = _good_messages()
    fresh = Client(_program("relu"))
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
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
    while _kind(m1) == "step":
        m1 = server.resume(client.reply_message(m1))
    while _kind(m2) == "step":
        m2 = server.resume(client.reply_message(m2))
    y1, y2 = client.decode_result(m1), client.decode_result(m2)
    assert y1.shape[0] == 2 and y2.shape[0] == 5
    tol = _tol(_program(name))
    np.testing.assert_allclose(y1, om.run_onnxruntime(_model(name), x1), atol=tol)
    np.testing.assert_allclose(y2, om.run_onnxruntime(_model(name), x2), atol=tol)


def test_message_limits_never_exceed_what_the_engine_decodes() -> None:
    """Thousands of rotation keys would need a keys message over 1 GiB: the limit stays at
    the engine's largest object (1 GiB), so such keys are refused as too large instead of
    failing inside the engine on an out-of-range limit."""
    from types import SimpleNamespace

    from heinfer.protocol.limits import MAX_MESSAGE_BYTES, message_limits

    prog = _program("square-relu")
    many = SimpleNamespace(
        params=prog.params,
        segments=prog.segments,
        needs_relin_key=True,
        rotation_steps=list(range(1, 3000)),
    )
    limits = message_limits(many)
    assert limits["keys"] == MAX_MESSAGE_BYTES == 1 << 30
    assert all(0 < v <= MAX_MESSAGE_BYTES for v in limits.values())
    assert message_limits(prog) == {**limits, "keys": message_limits(prog)["keys"]}


# ---------------------------------------------------------------------------------- one client, several sessions
def test_one_client_queries_each_of_its_sessions_under_that_sessions_key() -> None:
    """Two sessions of one client (two replicas of a server): the first session's queries
    after the second's keys were made are still encrypted under the first session's key (they
    were under the latest key, and decrypted to garbage clamped to the bound, silently)."""
    client, server_a, sa = _open("square-relu")
    server_b = Server(_program("square-relu"))
    sb = server_b.open_session(client.keys_message())
    for server, session in ((server_a, sa), (server_b, sb), (server_a, sa)):
        _assert_good_query("square-relu", client, server, session)
        assert client.last_out_of_range == 0


def test_a_session_this_client_holds_no_key_for_is_refused() -> None:
    client, server, session = _open("square-relu")
    other = Client(_program("square-relu").public())
    other_session = server.open_session(other.keys_message())
    with pytest.raises(heinfer.ProtocolError, match="not opened with keys this client made"):
        client.query_message(other_session, _x("square-relu"))
    for _ in range(16):  # sixteen later sessions: the first one's key is let go
        client.keys_message()
    with pytest.raises(heinfer.ProtocolError, match="not opened with keys this client made"):
        client.query_message(session, _x("square-relu"))


def test_a_refused_or_failed_query_is_forgotten_by_the_client() -> None:
    """A query the server refuses leaves nothing behind in the client (its state and, with no
    evaluation keys, its own secret key); queries nobody forgot are bounded."""
    from heinfer.inference import run_query
    from heinfer.protocol.client import MAX_QUERIES_IN_FLIGHT

    client, server, session = _open("relu")
    with pytest.raises(heinfer.ProtocolError):
        run_query(client, server, "f" * 48, _x("relu"))  # a session the server does not know
    assert not client._queries
    for _ in range(MAX_QUERIES_IN_FLIGHT + 5):
        client.query_message(session, _x("relu"))  # started, never finished
    assert len(client._queries) == MAX_QUERIES_IN_FLIGHT
    _assert_good_query("relu", client, server, session)


def test_a_failed_infer_closes_its_session() -> None:
    prog = _program("relu")
    server = Server(prog)
    with pytest.raises(heinfer.RangeError):
        heinfer.infer(prog, _x("relu") * 1e6, server=server)
    assert server.session_count == 0
