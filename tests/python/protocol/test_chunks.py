"""Queries, steps and replies in chunks: the split, the in-process protocol in chunks, and
chunk sequences a malicious server (or client) forges — each refused before anything is
decrypted or run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import heinfer
from heinfer.protocol.chunks import Cursor, bounds, chunks_for
from heinfer.protocol.messages import decode
from protocol.forge import reencode as _forge

DIGITS = np.load("models/digits_test.npz")["x"]
#: Chunks of about 64 KiB (CryptoNets-ReLU's ciphertexts take 10.8 kB fresh, 21.5 kB computed).
CHUNK = 64 << 10


@given(n=st.integers(1, 5000), chunks=st.integers(1, 5000))
def test_chunks_partition_the_ciphertexts_in_order(n: int, chunks: int) -> None:
    chunks = min(chunks, n)
    ranges = [bounds(n, chunks, i) for i in range(chunks)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    sizes = [b - a for a, b in ranges]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


@given(n=st.integers(1, 5000), ct=st.integers(1, 1 << 20), limit=st.integers(1 << 10, 1 << 24))
def test_each_chunk_fits_its_limit_when_one_ciphertext_does(n: int, ct: int, limit: int) -> None:
    c = chunks_for(n, ct, limit)
    assert 1 <= c <= n
    biggest = -(-n // c)
    if ct + 512 <= limit:
        assert biggest * ct + 512 <= limit
    assert chunks_for(n, ct, None) == 1


def test_cursor_takes_chunks_in_order_once() -> None:
    c = Cursor(10, "step 0")
    assert c.take(0, 3) == (0, 3) and not c.done
    with pytest.raises(heinfer.ProtocolError, match="chunk 0 where chunk 1 of 3 was expected"):
        c.take(0, 3)
    with pytest.raises(heinfer.ProtocolError, match="chunk 1 declares 4 chunks, chunk 0 declared 3"):
        c.take(1, 4)
    assert c.take(1, 3) == (3, 6) and c.take(2, 3) == (6, 10) and c.done
    with pytest.raises(heinfer.ProtocolError, match="after the last one"):
        c.take(3, 3)
    for bad in (0, 11):
        with pytest.raises(heinfer.ProtocolError, match="between 1 and 10"):
            Cursor(10, "step 0").take(0, bad)


def _step_chunks(client, server, session, x) -> list[bytes]:
    """The first step of a query sent in chunks, as chunks."""
    out = None
    for m in client.query_messages(session, x, CHUNK):
        assert len(m) <= CHUNK and out is None
        out = server.receive(m, CHUNK)
    assert out.kind == "step" and out.chunks > 1
    return list(out)


def test_the_protocol_in_chunks_gives_the_same_outputs_as_whole_messages(parties, relu_program) -> None:
    client, server, session = parties
    x = DIGITS[:37]
    chunks = _step_chunks(client, server, session, x)
    rounds = 0
    while True:
        replies = None
        for m in chunks:
            assert replies is None and len(m) <= CHUNK
            replies = client.receive_step(m, CHUNK)
        rounds += 1
        out = None
        for m in replies:
            out = server.receive(m, CHUNK)
        if out.kind == "result":
            (result,) = out
            break
        chunks = list(out)
    assert rounds == len(relu_program.steps)
    got = client.decode_result(result)
    want = heinfer.infer(relu_program, x).outputs
    assert np.array_equal(got.argmax(1), want.argmax(1))
    np.testing.assert_allclose(got, want, atol=0.05 * np.abs(want).max())
    assert server.query_count == 0


def test_a_replayed_chunk_is_refused(parties) -> None:
    """Defense: per-query state machine — each chunk of a step once, in order."""
    client, server, session = parties
    chunks = _step_chunks(client, server, session, DIGITS[:4])
    assert client.receive_step(chunks[0]) is None
    with pytest.raises(heinfer.ProtocolError, match="chunk 0 where chunk 1 .* was expected"):
        client.receive_step(chunks[0])
    with pytest.raises(heinfer.ProtocolError, match="did not start"):  # the query is forgotten
        client.receive_step(chunks[1])


def test_chunks_out_of_order_or_missing_are_refused(parties) -> None:
    """Defense: chunks in order; a step's reply only after its last chunk (missing chunks)."""
    client, server, session = parties
    chunks = _step_chunks(client, server, session, DIGITS[:4])
    with pytest.raises(heinfer.ProtocolError, match="chunk 1 where chunk 0"):
        client.receive_step(chunks[1])


def test_a_step_cut_differently_midway_is_refused(parties) -> None:
    """Defense: counts come from the program — the chunk count chunk 0 declared holds for the
    whole step, so a server cannot shift ciphertext boundaries between chunks."""
    client, server, session = parties
    chunks = _step_chunks(client, server, session, DIGITS[:4])
    total = decode(chunks[0])[1].chunks
    assert client.receive_step(chunks[0]) is None
    with pytest.raises(heinfer.ProtocolError, match=f"declares {total + 1} chunks, chunk 0 declared {total}"):
        client.receive_step(_forge(chunks[1], chunks=total + 1))


@pytest.mark.parametrize("chunks", [0, 10**6])
def test_an_impossible_chunk_count_is_refused(parties, chunks: int) -> None:
    """Defense: between 1 and the planned count of ciphertexts (no empty chunks)."""
    client, server, session = parties
    step = server.begin(client.query_message(session, DIGITS[:4]))
    with pytest.raises(heinfer.ProtocolError, match="chunks declared; between 1 and"):
        client.receive_step(_forge(step, chunks=chunks))


def test_a_chunk_with_the_wrong_count_of_ciphertexts_is_refused(parties) -> None:
    """Defense: each chunk holds exactly its share of the planned count (its ciphertexts are
    checked before decryption)."""
    client, server, session = parties
    chunks = _step_chunks(client, server, session, DIGITS[:4])
    with pytest.raises(heinfer.ProtocolError, match="expected \\d+ ciphertexts"):
        client.receive_step(_forge(chunks[0], chunks=1))  # claims to be the whole step


def test_the_server_refuses_chunk_sequences_a_client_forges(parties) -> None:
    """The server's side of the same rules: chunks of a query in order, each once, from the
    same query (session and reference), the count of items fixed by chunk 0."""
    client, server, session = parties
    chunks = list(client.query_messages(session, DIGITS[:4], CHUNK))
    assert len(chunks) > 2
    with pytest.raises(heinfer.ProtocolError, match="whose input this server is not receiving"):
        server.receive(chunks[1])
    assert server.receive(chunks[0]) is None
    with pytest.raises(heinfer.ProtocolError, match="already running"):
        server.receive(chunks[0])  # a replayed chunk 0
    with pytest.raises(heinfer.ProtocolError, match="declares 5 items, chunk 0 declared 4"):
        server.receive(_forge(chunks[1], items=5))
    assert server.query_count == 0  # a refused chunk forgets its query
    with pytest.raises(heinfer.ProtocolError, match="whose input this server is not receiving"):
        server.receive(chunks[1])
    chunks = list(client.query_messages(session, DIGITS[:4], CHUNK))
    assert server.receive(chunks[0]) is None
    with pytest.raises(heinfer.ProtocolError, match="chunk 2 where chunk 1"):
        server.receive(chunks[2])
    assert server.query_count == 0


def test_begin_takes_a_whole_query_only(parties) -> None:
    client, server, session = parties
    first = next(client.query_messages(session, DIGITS[:4], CHUNK))
    with pytest.raises(heinfer.ProtocolError, match="one chunk of several"):
        server.begin(first)


def test_decrypted_values_out_of_range_are_clamped_and_counted(relu_program) -> None:
    """Defense: a value out of its planned range (NaN and ±∞ included) never aborts and never
    passes: clamped to the bound (NaN to 0) and counted."""
    from heinfer.protocol.client import Client, _Query

    seg = relu_program.public().segments[-1]
    b = seg.output_bound
    rows = np.zeros((seg.n_output_cts, 8))
    rows[0, :5] = [np.nan, np.inf, -np.inf, 2 * b, -b]
    q = _Query(key=None, items=8)
    vals = Client._values(q, seg, rows)
    assert q.out_of_range == 4
    assert vals[:5, 0].tolist() == [0.0, b, -b, b, -b] and np.isfinite(vals).all()
