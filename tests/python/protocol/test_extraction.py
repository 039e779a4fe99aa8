"""A malicious client against client-aided steps: it rebuilds the whole model from one query.

This test keeps the README's privacy table honest. Client-aided steps (nGraph-HE2 §4.1)
show the client the pre-activations of every layer before a ReLU/max-pooling, and let it
answer each step with values of its choosing. A client that puts unit impulses ``e_j`` (and
one zero item) in its batch reads, at every step, ``W e_j + b`` — every column of the
segment's affine map — and then replies with impulses again to probe the next segment. One
query recovers every segment's map exactly: a network computing the same function.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import heinfer
import heinfer.program.ops
from heinfer.protocol.layouts import encrypt_segment_input
from heinfer.protocol.messages import decode, encode

DATA = np.load("models/digits_test.npz")
MODEL = "models/cryptonets_relu.onnx"


def _probe_items(width: int, items: int, c: float) -> np.ndarray:
    """``items`` rows: the zero vector, then the impulses ``c·e_0 … c·e_{width-1}``, then zeros."""
    x = np.zeros((items, width))
    x[1 : width + 1] = c * np.eye(width)
    return x


def test_a_client_rebuilds_the_model_through_client_aided_steps() -> None:
    prog = heinfer.compile(MODEL, mode="throughput", calibration=DATA["x"][:64])
    public = prog.public()
    assert not hasattr(public, "layers")  # the client is handed no weights
    client, server = heinfer.Client(public), heinfer.Server(prog)
    session = server.open_session(client.keys_message())
    widths = [s.in_size for s in public.segments]
    items = max(widths) + 1
    assert items <= public.batch_capacity and not public.pre

    # segment 0 is probed through the input itself (the images are the impulses)
    # impulses as large as the plan allows (the calibrated maximum of each segment's input)
    # keep the encryption noise small against the weights they reveal
    sizes = [public.input_bound / 4] + [s.output_bound / 4 for s in public.segments[:-1]]
    x0 = _probe_items(widths[0], items, sizes[0]).reshape(items, *public.input_shape)
    msg = server.begin(client.query_message(session, x0))
    maps = []
    for k in range(len(public.steps) + 1):
        kind, body = decode(msg)
        q = client._queries[body.ref]
        vals = client._open(q, public.segments[k], body.ciphertexts)  # (items, out_size)
        bias = vals[0]
        maps.append(((vals[1 : widths[k] + 1].T - bias[:, None]) / sizes[k], bias))  # W[:, j] = (f(c e_j) − f(0)) / c
        if kind == "result":
            break
        # reply with impulses for the next segment instead of the step's function
        q.next_step += 1
        batch = encrypt_segment_input(q.key.kg, public.segments[k + 1], _probe_items(widths[k + 1], items, sizes[k + 1]), public.slots)
        msg = server.resume(encode("reply", query=body.query, step=k, ciphertexts=batch.to_bytes(), chunk=0, chunks=1))

    # the stolen network: the extracted affine maps and the public step functions
    x = DATA["x"].reshape(len(DATA["x"]), -1)
    y = x
    for k, (w, b) in enumerate(maps):
        y = y @ w.T + b
        if k < len(public.steps):
            y = public.steps[k].apply(y)
    for f in public.post:
        y = f.apply(y)
    sess = ort.InferenceSession(MODEL)
    ref = sess.run(None, {sess.get_inputs()[0].name: DATA["x"].astype(np.float32)})[0]
    # the same function up to the protocol's noise: only near-ties may flip
    assert (y.argmax(1) == ref.argmax(1)).mean() >= 0.99
    # each column carries one ciphertext's noise at the planned precision (a few 1e-4 of the
    # range); summed over 784 inputs that is ~2 % of the logits — repeated probes would
    # average it away
    assert np.abs(y - ref).max() / np.abs(ref).max() < 0.05


def test_slot_layout_steps_show_the_pre_activations() -> None:
    """In the slot layout too, the client decrypts one item's pre-activations as they are:
    they equal the plaintext network's first layers (computed here from the server's
    weights), up to CKKS noise — no factor, no permutation."""
    lat = heinfer.compile(MODEL, mode="latency", calibration=DATA["x"][:64], measure_costs=False)
    client, server = heinfer.Client(lat.public()), heinfer.Server(lat)
    session = server.open_session(client.keys_message())
    x = DATA["x"][:1]
    _, body = decode(server.begin(client.query_message(session, x)))
    seen = client._open(client._queries[body.ref], lat.segments[0], body.ciphertexts)[0]
    thr = heinfer.compile(MODEL, mode="throughput", calibration=DATA["x"][:64])
    y = x.reshape(-1)
    for op in thr.segments[0].ops:  # the same first segment, in plaintext
        if isinstance(op, heinfer.program.ops.Linear):
            lay = thr.layers[op.layer]
            y = lay.matrix @ y + (lay.bias if lay.bias is not None else 0.0)
    assert np.abs(seen - y).max() < 1e-3 * np.abs(y).max()
