"""A malicious server against the client: every test names the defense it checks.

The server here is the honest :class:`heinfer.Server` whose messages the test then replays,
reorders, forges or replaces; the client is the real :class:`heinfer.Client` holding only the
public program. A defense holds when the client refuses the message before decrypting it
(structural checks reveal nothing about the key) or neutralizes it (no abort, no error text
and no released bit that depends on a decrypted value beyond the program's stated precision).
"""

from __future__ import annotations

import numpy as np
import pytest

import heinfer
from heinfer import _native
from heinfer.protocol.messages import decode, encode
from protocol.forge import ANY_ROUNDING
from protocol.forge import reencode as _forge

DIGITS = np.load("models/digits_test.npz")["x"]


def _first_step(client, server, session, n: int = 4) -> bytes:
    return server.begin(client.query_message(session, DIGITS[:n]))


def _batch(params, message: bytes) -> _native.CiphertextBatch:
    return _native.CiphertextBatch.from_bytes(params, decode(message)[1].ciphertexts, 1 << 30, 1 << 20, ANY_ROUNDING)


def test_replayed_step_is_refused(parties) -> None:
    """Defense: per-query state machine — each step is answered once."""
    client, server, session = parties
    step = _first_step(client, server, session)
    client.reply_message(step)
    with pytest.raises(heinfer.ProtocolError, match="replayed, out of order or forged"):
        client.reply_message(step)


def test_out_of_order_step_is_refused(parties) -> None:
    """Defense: per-query state machine — steps are answered in order."""
    client, server, session = parties
    step = _first_step(client, server, session)
    with pytest.raises(heinfer.ProtocolError, match="step 1 while waiting for step 0"):
        client.reply_message(_forge(step, step=1))


def test_extra_step_after_the_last_is_refused(parties) -> None:
    """Defense: per-query state machine — no step beyond the program's steps."""
    client, server, session = parties
    msg = _first_step(client, server, session)
    steps = []
    while decode(msg)[0] == "step":
        steps.append(msg)
        msg = server.resume(client.reply_message(msg))
    extra = _forge(steps[-1], step=len(steps))
    with pytest.raises(heinfer.ProtocolError, match="an extra step"):
        client.reply_message(extra)


def test_result_before_the_last_step_is_refused(parties) -> None:
    """Defense: a result only after the last step (missing steps)."""
    client, server, session = parties
    step = _first_step(client, server, session)
    _, body = decode(step)
    forged = encode("result", query=body.query, ref=body.ref, ciphertexts=body.ciphertexts)
    with pytest.raises(heinfer.ProtocolError, match="a result after 0 of 2 steps"):
        client.decode_result(forged)


def test_step_for_a_query_the_client_did_not_start_is_refused(parties) -> None:
    """Defense: answers only for queries this client started (its own references)."""
    client, server, session = parties
    step = _first_step(client, server, session)
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
        client.reply_message(_forge(step, ref="ab" * 16))


def test_a_failed_query_is_forgotten(parties) -> None:
    """Defense: a query whose step was refused cannot be resumed with a good message."""
    client, server, session = parties
    step = _first_step(client, server, session)
    with pytest.raises(heinfer.ProtocolError):
        client.reply_message(_forge(step, step=1))
    with pytest.raises(heinfer.ProtocolError, match="did not start"):
        client.reply_message(step)


def test_changed_query_id_is_refused(parties) -> None:
    """Defense: the server's query id is bound at the first message of a query."""
    client, server, session = parties
    step = _first_step(client, server, session)
    client_reply = client.reply_message(step)
    nxt = server.resume(client_reply)
    with pytest.raises(heinfer.ProtocolError, match="changed the id"):
        client.reply_message(_forge(nxt, query="cd" * 16))


@pytest.mark.parametrize("delta", [-1, +1])
def test_forged_count_is_refused(parties, delta: int) -> None:
    """Defense: counts come from the public program, never from the message."""
    client, server, session = parties
    step = _first_step(client, server, session)
    batch = _batch(client.params, step)
    n = len(batch) + delta
    forged = batch.take([i % len(batch) for i in range(n)])
    with pytest.raises((heinfer.ProtocolError, heinfer.SerializationError), match="ciphertexts"):
        client.reply_message(_forge(step, ciphertexts=forged.to_bytes()))


def test_wrong_level_is_refused() -> None:
    """Defense: levels come from the public program (a slot-layout program, whose steps sit
    above level 0; the forged batch is well formed, under the attacker's own key)."""
    prog = heinfer.compile("models/cryptonets_relu.onnx", mode="latency", calibration=DIGITS[:64], measure_costs=False)
    client, server = heinfer.Client(prog.public()), heinfer.Server(prog)
    session = server.open_session(client.keys_message())
    step = server.begin(client.query_message(session, DIGITS[:1]))
    seg = prog.segments[0]
    kg = _native.KeyGenerator(client.params)
    other = seg.output_level + 1
    forged = _native.encrypt_batch(kg, np.zeros((seg.n_output_cts, 4), np.complex128), seg.output_scale, other)
    with pytest.raises(heinfer.ProtocolError, match="at level"):
        client.reply_message(_forge(step, ciphertexts=forged.to_bytes()))


def test_wrong_scale_is_refused(parties) -> None:
    """Defense: scales come from the public program (exact, from the primes)."""
    client, server, session = parties
    step = _first_step(client, server, session)
    cts = _batch(client.params, step).to_list()
    for c in cts:
        c.set_scale(c.scale * 2.0)
    forged = _native.CiphertextBatch.from_list(cts)
    with pytest.raises(heinfer.ProtocolError, match="scale"):
        client.reply_message(_forge(step, ciphertexts=forged.to_bytes()))


def test_wrong_size_is_refused(parties) -> None:
    """Defense: ciphertext sizes come from the public program (a size-3 product refused)."""
    client, server, session = parties
    step = _first_step(client, server, session)
    cts = _batch(client.params, step).to_list()
    for c in cts:  # a server forges what it likes: here a scale whose square the level holds
        c.set_scale(2.0**10)
    forged = _native.CiphertextBatch.from_list(cts)
    _native.batch_square(forged)
    with pytest.raises((heinfer.ProtocolError, heinfer.SerializationError), match="size|exceed the limit"):
        client.reply_message(_forge(step, ciphertexts=forged.to_bytes()))


def test_out_of_range_values_are_clamped_not_raised(parties) -> None:
    """Defense: a decrypted value out of range never aborts and never appears in an error;
    it is clamped, the query finishes and the count is reported afterwards."""
    client, server, session = parties
    step = _first_step(client, server, session)
    ev = _native.Evaluator(client.params)
    cts = _batch(client.params, step).to_list()
    blown = _native.CiphertextBatch.from_list([ev.mul_const(c, 1e6, 1.0) for c in cts])  # ×10^6, same scale
    good_reply = client.reply_message(step)  # an honest answer, for comparison of lengths
    # a second query of the same client, whose step 0 the attacker blows up
    step_b = _first_step(client, server, session)
    forged = _forge(step_b, ciphertexts=blown.to_bytes())
    reply = client.reply_message(forged)  # no exception
    assert abs(len(reply) - len(good_reply)) < 64  # the reply's size does not depend on the values
    msg = server.resume(reply)
    while decode(msg)[0] == "step":
        msg = server.resume(client.reply_message(msg))
    out = client.decode_result(msg)  # no exception either
    assert np.isfinite(out).all()
    assert client.last_out_of_range > 0


def _forge_zero_one(template: bytes, native_params, params: dict) -> bytes:
    """A ciphertext ``(0, …, 0, 1)`` with ``template``'s header (level, scale, ``k`` parts):
    it decrypts to the secret key's power ``s^(k−1)`` — the key itself at two parts. Residues
    are bit-packed per limb (``bits`` bits each, least significant first); evaluation form,
    so ``1`` is all ones."""
    n = 1 << int(params["log_n"])
    ct = _native.Ciphertext.from_bytes(native_params, template, 1 << 30)
    bits = params["log_q"][: ct.level + 1]
    poly_len = sum(-(-n * b // 8) for b in bits)
    head = template[: len(template) - ct.size * poly_len]
    zero = bytes(poly_len)
    one = b"".join(int(sum(1 << (i * b) for i in range(n))).to_bytes(-(-n * b // 8), "little") for b in bits)
    return head + zero * (ct.size - 1) + one


def test_forged_ciphertext_that_decrypts_to_the_secret_key_is_neutralized(parties, relu_program) -> None:
    """Defense: outputs released with no more precision than the program states — the
    forged ``(0, 1)``, which decrypts to the secret key, comes out as rounding noise."""
    client, server, session = parties
    msg = _first_step(client, server, session)
    while decode(msg)[0] == "step":
        msg = server.resume(client.reply_message(msg))
    _, body = decode(msg)
    cts = _batch(client.params, msg).to_list()
    forged_cts = [_native.Ciphertext.from_bytes(client.params, _forge_zero_one(c.to_bytes(), client.params, relu_program.params), 1 << 30) for c in cts]
    # the forgery is meaningful: undefended, it decrypts to key-dependent coefficients
    q = client._queries[body.ref]
    raw = _native.decrypt_batch_coefficients(q.key.dec, _native.CiphertextBatch.from_list(forged_cts))
    assert np.count_nonzero(raw) > 0.5 * raw.size
    forged = encode("result", query=body.query, ref=body.ref, ciphertexts=_native.CiphertextBatch.from_list(forged_cts).to_bytes())
    out = client.decode_result(forged)
    prec = relu_program.segments[-1].precision
    assert np.abs(out).max() <= 8 * prec  # nothing but the flooding noise, rounded
    assert np.allclose(out / prec, np.round(out / prec))


def test_a_forged_five_part_result_that_decrypts_to_a_power_of_the_key_is_neutralized() -> None:
    """Defense, for an open tail (CryptoNets x²: results of five parts, decrypted with
    ``s³`` and ``s⁴``): a forged ``(0, 0, 0, 0, 1)``, which decrypts to ``s⁴``, comes out as
    rounding noise like the two-part forgery — the output scale (2^92 here) dwarfs ``s⁴``."""
    prog = heinfer.compile("models/cryptonets.onnx", mode="throughput", calibration=DIGITS[:64])
    assert prog.segments[-1].output_parts == 5
    client, server = heinfer.Client(prog.public()), heinfer.Server(prog)
    session = server.open_session(client.keys_message())
    msg = server.begin(client.query_message(session, DIGITS[:4]))
    _, body = decode(msg)
    cts = _batch(client.params, msg).to_list()
    assert cts[0].size == 5
    forged_cts = [_native.Ciphertext.from_bytes(client.params, _forge_zero_one(c.to_bytes(), client.params, prog.params), 1 << 30) for c in cts]
    q = client._queries[body.ref]
    raw = _native.decrypt_batch(q.key.dec, _native.CiphertextBatch.from_list(forged_cts))
    assert np.count_nonzero(raw) > 0.5 * raw.size  # key-dependent, undefended
    forged = encode("result", query=body.query, ref=body.ref, ciphertexts=_native.CiphertextBatch.from_list(forged_cts).to_bytes())
    out = client.decode_result(forged)
    prec = prog.segments[-1].precision
    assert np.abs(out).max() <= 8 * prec and client.last_out_of_range == 0
    assert np.allclose(out / prec, np.round(out / prec))


def test_fresh_secret_key_per_session_and_per_keyless_query(relu_program) -> None:
    """Defense: a fresh secret key per session, and per query when no evaluation key ties
    queries together."""
    client = heinfer.Client(relu_program.public())
    server = heinfer.Server(relu_program)
    session = server.open_session(client.keys_message())
    client.query_message(session, DIGITS[:1])
    client.query_message(session, DIGITS[:1])
    keys = [q.key.kg.secret_key().to_bytes() for q in client._queries.values()]
    assert keys[0] != keys[1]


def test_fresh_secret_key_per_session_with_evaluation_keys(squares) -> None:
    """Defense: a fresh secret key per session (a program with a relinearization key)."""
    prog = squares
    assert prog.needs_relin_key
    client = heinfer.Client(prog.public())
    client.keys_message()
    first = client._session_key.kg.secret_key().to_bytes()
    client.keys_message()
    assert client._session_key.kg.secret_key().to_bytes() != first


def test_outputs_are_released_at_the_stated_precision(parties, relu_program) -> None:
    """Defense: released outputs are multiples of the stated precision (low bits dropped)."""
    client, server, session = parties
    result = heinfer.infer(relu_program, DIGITS[:8], client=client, server=server)
    prec = relu_program.segments[-1].precision
    assert np.allclose(result.outputs / prec, np.round(result.outputs / prec), atol=1e-6)
