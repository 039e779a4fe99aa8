"""GAZELLE's two-party protocol (§4, §7): the client learns the output, the server nothing.

Layer: ``heinfer.protocol``. Per query (one item in latency mode; up to ``batch_capacity``
items in throughput mode, element ``e`` of every layer in ciphertext ``e`` with the items along
its slots, one circuit per item and activation), with additive shares mod ``p``:

1. **set-up** (once per session): the client sends its BFV public key and rotation keys and
   the garbled-circuit session's base-OT message; the server answers the base OTs.
2. **offline** (no data yet): the client names the query's item count (a 4-byte header); one
   garbled-circuit step per non-linear layer — the server draws its masks ``r`` and output
   shares, garbles, and sends the circuits.
3. **online**: the client encrypts its input (fixed point). For each linear layer the server
   adds its own share of the layer's input (after the first), runs the layer on the BFV
   ciphertexts, adds the next step's masks ``r`` at the positions of the step's inputs and
   uniform values everywhere else, re-randomizes with the client's public key and floods the
   noise (:class:`heinfer.bfv.Rerandomizer`), and sends the result, switched down to the
   fewest primes and without the low bits the flooded error leaves free (both public
   post-processing; the client refuses a result at another level or rounded further than
   the layer's flooding allows). The client decrypts its
   share ``c = y + r``: uniform mod ``p`` in every slot. The garbled circuit reconstructs
   ``y``, applies ReLU (or max-pool with ReLU), truncates and re-shares; the client encrypts
   its new share for the next layer. After the last layer the server masks every slot but the
   outputs, floods, and the client decrypts the output. A layer whose last rotate-and-add
   folds moved to the shares (:mod:`heinfer.program.share_folds`) is sent unfolded, with masks
   whose folds are those above; each party folds its own share.
4. **squares** (GAZELLE's AHE square protocol): the step's circuit only truncates; with
   shares ``a`` (client) and ``b`` (server) of its output ``z``, the client encrypts ``a²`` and
   ``a``, and the server computes ``W·z² = W·(Enc(a²) + b²) + (W·diag(2b))·Enc(a)`` — the next
   layer run twice, the second time with its diagonals scaled by ``2b`` (encoded offline:
   ``b`` is the server's output share of the circuit, drawn before any data), so ``Enc(a)``
   goes through one product like any input. In latency mode ``a²`` and ``a`` travel in the two
   rows of the slots of one ciphertext list, each multiplier holds ``W``'s diagonal in row 0
   and the scaled one in row 1, so one run of the layer computes both; the result's two rows
   are summed on the shares (the masks of each output's two parts sum to its mask; each party
   adds row 1 of its share into row 0), not by a row swap on the server.

What each party learns (semi-honest, as GAZELLE): the client the output and the public
architecture; the server nothing (it sees BFV ciphertexts and OT messages). Both parties are
objects over ``bytes`` messages; :func:`run_in_process` plays both.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator

import numpy as np

from heinfer import bfv, ckks
from heinfer.errors import ProtocolError
from heinfer.program.modular import mul_mod
from heinfer.program.share_folds import masks_for_folds
from heinfer.program.two_party import TwoPartyProgram
from heinfer.protocol.client import check_input
from heinfer.runtime.bfv_batch import prepare_batch_layers
from heinfer.runtime.bfv_transform import BfvLayer, prepare_layers
from heinfer.threads import parallel_map
from heinfer.protocol.two_party_steps import ClientStepRun, ServerStepRun
from heinfer.twoparty import TwoPartyClient, TwoPartyServer

__all__ = ["Party", "TwoPartyInferenceClient", "TwoPartyInferenceServer", "queries", "run_in_process"]

#: Largest message either party accepts for one ciphertext.
MAX_CIPHERTEXT_BYTES = 1 << 22


def _params(prog: TwoPartyProgram) -> bfv.BfvParameters:
    b = prog.bfv
    return bfv.BfvParameters(b["log_n"], b["log_q"], b["log_p"], b["plain_modulus"], b["security"])


def queries(prog: TwoPartyProgram, x: np.ndarray, most: int | None = None) -> Iterator[np.ndarray]:
    """The items ``x`` in queries of at most ``prog.batch_capacity`` items (one in latency
    mode), or at most ``most`` when smaller (a transport's message limit)."""
    if len(x) == 0:  # checked here, not when the first query is asked for
        raise ProtocolError("x holds no items")
    size = min(prog.batch_capacity, most or prog.batch_capacity)
    return (x[start : start + size] for start in range(0, len(x), size))


def _items_header(items: int) -> bytes:
    return struct.pack("<I", items)


class Party:
    """Shared plumbing: parameters and the ciphertext codec (every message is validated)."""

    def __init__(self, prog: TwoPartyProgram) -> None:
        self.prog = prog
        self.params = _params(prog)
        self.p = prog.plain_modulus
        self.n = self.params.n

    def _bytes(self, c: ckks.Ciphertext) -> bytes:
        return bytes(self.params._raw.ciphertext_to_bytes(c._raw))

    def _dump(self, cts: list) -> list[bytes]:
        return parallel_map(self._bytes, cts)

    def _result_bytes(self, c: ckks.Ciphertext, bits: int) -> bytes:
        """A result flooded with ``2^bits``: switched down already, rounded on the wire."""
        return bytes(self.params._raw.result_to_bytes(c._raw, bits))

    def _load(self, msgs: list[bytes], count: int, what: str) -> list:
        """``count`` validated input ciphertexts, each at the top level (an input to compute on:
        only results travel switched down to fewer primes)."""
        if len(msgs) != count:
            raise ProtocolError(f"{what}: expected {count} ciphertexts, got {len(msgs)}")
        rlwe = self.params.rlwe
        cts = parallel_map(lambda m: ckks.Ciphertext._wrap(self.params._raw.ciphertext_from_bytes(m, MAX_CIPHERTEXT_BYTES), rlwe), msgs)
        top_level = len(self.prog.bfv["log_q"]) - 1
        for i, c in enumerate(cts):
            if c.level != top_level:
                raise ProtocolError(f"{what}: ciphertext {i} is at level {c.level}; inputs are at level {top_level}")
        return cts


class TwoPartyInferenceClient(Party):
    """The client: holds the public program and the secret key; one query at a time."""

    def __init__(self, prog: TwoPartyProgram) -> None:
        super().__init__(prog.public() if not prog.is_public else prog)
        self._kg = ckks.KeyGenerator(self.params.rlwe)
        self._dec = bfv.Decryptor(self.params, self._kg.secret_key)
        self._enc = bfv.BatchEncoder(self.params)
        self._gc, self._hello = TwoPartyClient.start()
        self._steps: list = []
        self._k = -1
        self._items = 0

    def keys_message(self) -> dict[str, bytes]:
        """Public key, rotation keys and the base-OT message (once per session)."""
        p = self.prog
        keys = self._kg.galois_keys(p.rotation_steps) if p.rotation_steps else None
        return {"pk": self._kg.public_key().to_bytes(), "galois": keys.to_bytes() if keys else b"", "ot": self._hello}

    def finish_setup(self, msg: bytes) -> None:
        """The server's base-OT answer."""
        self._gc.finish_setup(msg)

    def offline_request(self, items: int = 1) -> list[bytes]:
        """The next query's item count (a 4-byte header), then one OT-extension request per
        garbled-circuit step (``items`` circuits per activation)."""
        if not 1 <= items <= self.prog.batch_capacity:
            raise ProtocolError(f"{items} items in one query; this program takes 1 to {self.prog.batch_capacity}")
        self._steps = [ClientStepRun(self._gc, st, self.p, items, k) for k, st in enumerate(self.prog.steps)]
        self._items = items
        return [_items_header(items)] + [step.request for step in self._steps]

    def offline_finish(self, msgs: Iterable[bytes]) -> None:
        """The server's garbled circuits and OT corrections, one message per step (a list, or
        an iterator read one step at a time, as :meth:`TwoPartyInferenceServer.offline_steps`
        yields them: no message is held after its step has read it)."""
        count = 0
        for m in msgs:
            if count == len(self._steps):
                raise ProtocolError(f"offline: expected {len(self._steps)} messages, got more")
            self._steps[count].receive_offline(m)
            count += 1
        if count != len(self._steps):
            raise ProtocolError(f"offline: expected {len(self._steps)} messages, got {count}")

    def query(self, x: np.ndarray) -> list[bytes]:
        """The encrypted input of the query's items (fixed point with the program's fractional
        bits): ``(items, *input_shape)`` as announced offline, or one item ``input_shape``."""
        if len(self._steps) != len(self.prog.steps) or not self._items:
            raise ProtocolError("run the offline phase before a query")
        x = np.asarray(x, dtype=np.float64)
        shape = tuple(self.prog.input_shape)
        if x.shape == shape:
            x = x[None]
        if x.shape[1:] != shape:
            raise ProtocolError(f"an item has shape {x.shape[1:]}, the model takes {shape}")
        if len(x) != self._items:
            raise ProtocolError(f"{len(x)} items in a query announced with {self._items}")
        x = x.reshape(len(x), -1)
        for f in self.prog.pre:  # client functions before the first layer, in the clear
            x = f.apply(x)
        check_input(x, self.prog.input_bound)  # RangeError: the plan's integers would wrap mod p
        v = np.rint(x * 2.0**self.prog.input_frac).astype(np.int64)
        self._k = 0
        return self._encrypt(0, v)

    def _encrypt(self, k: int, values: np.ndarray, row1: np.ndarray | None = None) -> list[bytes]:
        """Segment ``k``'s input ``values`` encrypted (and ``row1``'s in row 1 of the slots)."""
        seg = self.prog.segments[k]
        rows = seg.input_rows(values, self.n, self.prog.batch_axis)
        if row1 is not None:
            rows[:, self.n // 2 :] = seg.input_rows(row1, self.n, False)[:, : self.n // 2]
        rows = seg.wire_rows(rows, self.n)  # two inputs per ciphertext where the layer pairs them
        # one ciphertext per row, encrypted and serialized on every engine thread
        return parallel_map(lambda r: self._bytes(self._kg.encrypt_symmetric(self._enc.encode(r))), list(rows))

    def _results(self, k: int, msgs: list[bytes]) -> list:
        """Layer ``k``'s result ciphertexts, validated: at the level its flooding names, rounded
        at most as far as that flooding allows (:meth:`heinfer.bfv.BfvParameters.result_drop_bits`)."""
        seg = self.prog.segments[k]
        if len(msgs) != seg.output.n_cts:
            raise ProtocolError(f"layer {k} result: expected {seg.output.n_cts} ciphertexts, got {len(msgs)}")
        rlwe = self.params.rlwe
        return parallel_map(lambda m: ckks.Ciphertext._wrap(self.params._raw.result_from_bytes(m, MAX_CIPHERTEXT_BYTES, seg.flood_bits), rlwe), msgs)

    def _decrypt(self, k: int, msgs: list[bytes]) -> np.ndarray:
        """Layer ``k``'s result: ``items × out_size`` residues."""
        seg = self.prog.segments[k]
        slots = np.stack(parallel_map(self._dec.decrypt, self._results(k, msgs)))
        # row sums and folds on the shares, if any
        return seg.read(slots, self._items, self.prog.batch_axis, self.p, self.prog.rows_summed(k))

    def choose(self, k: int, msgs: list[bytes]) -> bytes:
        """Decrypts layer ``k``'s masked result (the client's shares) and answers with its OT
        choices for step ``k``."""
        if k != self._k or k >= len(self.prog.steps):
            raise ProtocolError(f"unexpected result of layer {k}")
        return self._steps[k].choose(self._decrypt(k, msgs))  # item-major: the circuits of item 0, then item 1, …

    def next_input(self, k: int, labels: bytes) -> list[bytes]:
        """Evaluates step ``k`` with the server's labels; encrypts the new share for layer ``k+1``."""
        if k != self._k:
            raise ProtocolError(f"unexpected labels of step {k}")
        z = self._steps[k].finish(labels)
        self._k = k + 1
        if self.prog.rows_packed(k + 1):  # the AHE square: a² in row 0, a in row 1
            return self._encrypt(k + 1, mul_mod(z, z, self.p), z)
        if self.prog.squared_input(k + 1):  # throughput mode: Enc(a²), then Enc(a)
            return self._encrypt(k + 1, mul_mod(z, z, self.p)) + self._encrypt(k + 1, z)
        return self._encrypt(k + 1, z)

    def finish(self, msgs: list[bytes]) -> np.ndarray:
        """The outputs of the query's items (``items × …``) from the last layer's result."""
        last = len(self.prog.segments) - 1
        if self._k != last:
            raise ProtocolError("the output arrived before the last layer")
        v = self._decrypt(last, msgs).astype(np.int64)
        self._k, self._steps, self._items = -1, [], 0
        y = np.where(v > (self.p - 1) // 2, v - self.p, v).astype(np.float64) * 2.0**-self.prog.output_frac
        for f in self.prog.post:
            y = f.apply(y)
        return y


class TwoPartyInferenceServer(Party):
    """The server: the program with its weights (encoded once) and one client's session."""

    def __init__(self, prog: TwoPartyProgram, keys: dict[str, bytes], layers: list[BfvLayer] | None = None) -> None:
        if prog.is_public:
            raise ProtocolError("the server needs the program with its weights")
        super().__init__(prog)
        rlwe = self.params.rlwe
        pk = ckks.PublicKey.from_bytes(rlwe, keys["pk"])
        self._galois = ckks.GaloisKeys.from_bytes(rlwe, keys["galois"]) if prog.rotation_steps else None
        self._ev = bfv.Evaluator(self.params)
        self._enc = bfv.BatchEncoder(self.params)
        self._rr = bfv.Rerandomizer(self.params, pk)
        self.layers = layers or prepare_server_layers(self.params, prog)
        self._gc, self.setup_reply = TwoPartyServer.start(keys["ot"])
        self._steps: list = []
        self._items = 0
        #: per squared segment: what multiplies Enc(a), encoded offline per query (_cross_term)
        self._cross: dict[int, BfvLayer | list] = {}
        #: what the query in flight takes next: ("layer", k) or ("labels", k); None between
        #: queries. Each layer runs once per offline phase: a second run under the same masks
        #: r_k and shares would hand the client W_k·(x − x') in the clear (the weights).
        self._next: tuple[str, int] | None = None

    def offline(self, msgs: list[bytes]) -> list[bytes]:
        """Masks, garbling and OT corrections for every step of the next query (``msgs``: the
        item-count header and one request per step), all steps' replies at once."""
        return list(self.offline_steps(msgs))

    def offline_steps(self, msgs: list[bytes]) -> Iterator[bytes]:
        """:meth:`offline` one step at a time: the requests are checked now, and each step is
        garbled when its reply is asked for and not kept after (a query's circuits need not
        all be in memory at once). The query is ready once every reply has been taken."""
        if len(msgs) != len(self.prog.steps) + 1:
            raise ProtocolError(f"offline: expected a header and {len(self.prog.steps)} requests, got {len(msgs)} blobs")
        if len(msgs[0]) != 4 or not 1 <= (items := struct.unpack("<I", msgs[0])[0]) <= self.prog.batch_capacity:
            raise ProtocolError(f"offline: the header must name 1 to {self.prog.batch_capacity} items per query")
        self._steps, self._items, self._next = [], 0, None  # a request refused below leaves no query behind
        return self._garble(items, msgs[1:])

    def _garble(self, items: int, requests: list[bytes]) -> Iterator[bytes]:
        steps = []
        for k, (st, m) in enumerate(zip(self.prog.steps, requests)):
            step = ServerStepRun(self._gc, st, self.p, items, k, m)
            steps.append(step)
            yield step.take_reply()
        self._steps, self._items = steps, items
        self._cross = {k: self._cross_term(k) for k in range(len(self.prog.segments)) if self.prog.squared_input(k)}
        self._next = ("layer", 0)

    def _expect(self, what: str, k: int) -> None:
        """Refuses a message the query in flight does not take now: each layer and each
        step's labels once, in order (layer 0, labels 0, layer 1, …, the last layer)."""
        if self._next is None:
            raise ProtocolError("run the offline phase before a query (each offline phase serves one query)")
        if self._next != (what, k):
            raise ProtocolError(
                f"{what} {k} out of order: the query takes {self._next[0]} {self._next[1]} now (each layer runs once "
                "per offline phase: its masks are used once)"
            )

    def _cross_term(self, k: int):
        """What multiplies ``Enc(a)`` after a square, encoded offline from the server's share
        ``b``: latency mode's layer whose multipliers hold, in row 1, its diagonals scaled by
        ``2b`` (one item); throughput mode's ``2b`` per input element (one slot per item)."""
        twice_b = 2 * self._share(k - 1) % self.p
        seg = self.prog.segments[k]
        if not self.prog.batch_axis:
            return self.layers[k].with_cross_term(seg.gather, twice_b[0], self.p)
        return parallel_map(self._enc.encode_multiplier, list(seg.input_rows(twice_b, self.n, True)))

    def _share(self, k: int) -> np.ndarray:
        """The server's shares (``int64`` residues, ``items × out_size``) of step ``k``'s outputs."""
        return self._steps[k].output_shares()

    def layer(self, k: int, msgs: list[bytes]) -> list[bytes]:
        """Runs linear layer ``k`` on the client's encrypted share; returns the masked,
        re-randomized, flooded result."""
        if len(self._steps) != len(self.prog.steps) or not self._items:
            raise ProtocolError("run the offline phase before a query")
        self._expect("layer", k)
        seg = self.prog.segments[k]
        squared = self.prog.squared_input(k)
        n = seg.n_input_cts
        cts = self._load(msgs, n * self.prog.input_lists(k), f"layer {k} input")
        if k > 0:  # add the server's share of the input: Enc(z) + ρ = Enc(y); squared: Enc(a²) + b²
            share = self._share(k - 1)
            if squared:
                share = mul_mod(share, share, self.p)
            rows = seg.wire_rows(seg.input_rows(share, self.n, self.prog.batch_axis), self.n)
            cts[:n] = parallel_map(lambda cr: self._ev.add_plain(cr[0], self._enc.encode(cr[1])), list(zip(cts[:n], rows)))
        if self.prog.batch_axis:
            if squared:  # Enc(z²) = Enc(a²) + b² + Enc(a)·2b per element, b one share per item
                sq, lin, twice_b = cts[:n], cts[n:], self._cross[k]
                cts = parallel_map(lambda i: self._ev.add(sq[i], self._ev.mul_plain(lin[i], twice_b[i])), range(n))
            out = self.layers[k].run(self._ev, cts)
        else:  # squared: W·(Enc(a²) + b²) in row 0, (W·diag(2b))·Enc(a) in row 1
            out = (self._cross[k] if squared else self.layers[k]).run(self._ev, cts, self._galois)
        masks = bfv.uniform_mod((len(out), self.n), self.p)
        if k < len(self.prog.steps):  # the step's inputs of every item: its masks, item-major
            step = self._steps[k]
            masks[seg.positions(step.entries, self._items, self.prog.batch_axis)] = step.masks()
        else:  # the output: unmasked at its positions, uniform everywhere else
            masks[seg.positions(np.arange(seg.out_size), self._items, self.prog.batch_axis)] = 0
        summed = self.prog.rows_summed(k)
        if seg.fold or summed:  # the client sums its share's rows and folds them: so must the masks
            masks = masks_for_folds(masks, seg.output, seg.fold, self.p, 2 if summed else 1)
        # flooded, switched down to the fewest primes that decrypt it (a third of the bytes) and
        # sent without the low bits the flooded error leaves free (another 39 %)
        def send(cm: tuple) -> bytes:
            return self._result_bytes(self._rr.rerandomize_compact(self._ev.add_plain(cm[0], self._enc.encode(cm[1])), seg.flood_bits), seg.flood_bits)

        replies = parallel_map(send, list(zip(out, masks)))
        if k < len(self.prog.steps):
            self._next = ("labels", k)
        else:  # the query is answered: its masks and circuits are spent
            self._steps, self._items, self._cross, self._next = [], 0, {}, None
        return replies

    def labels(self, k: int, choices: bytes) -> bytes:
        """The client's input labels of step ``k`` by oblivious transfer (once, after layer
        ``k``)."""
        self._expect("labels", k)
        reply = self._steps[k].labels(choices)
        self._next = ("layer", k + 1)
        return reply


def run_in_process(prog: TwoPartyProgram, x: np.ndarray, server: TwoPartyInferenceServer | None = None) -> tuple[np.ndarray, dict]:
    """Plays both parties on the items ``x`` (one query each); returns the outputs and a
    report: set-up, offline and online seconds and bytes (both ways, every message)."""
    client = TwoPartyInferenceClient(prog.public())
    t0 = time.perf_counter()
    keys = client.keys_message()
    layers = server.layers if server is not None else None
    server = TwoPartyInferenceServer(prog, keys, layers)
    client.finish_setup(server.setup_reply)
    rep = {"setup_s": time.perf_counter() - t0, "setup_bytes": sum(map(len, keys.values())) + len(server.setup_reply)}
    rep.update(offline_s=0.0, online_s=0.0, offline_bytes=0, online_bytes=0)
    outs = []
    for batch in queries(prog, np.asarray(x)):
        t0 = time.perf_counter()
        req = client.offline_request(len(batch))
        sizes: list[int] = []  # each step's circuits go to the client as soon as they are garbled
        client.offline_finish(sizes.append(len(m)) or m for m in server.offline_steps(req))
        t1 = time.perf_counter()
        rep["offline_s"] += t1 - t0
        rep["offline_bytes"] += sum(map(len, req)) + sum(sizes)
        msgs = client.query(batch)
        online = sum(map(len, msgs))
        for k in range(len(prog.segments)):
            res = server.layer(k, msgs)
            online += sum(map(len, res))
            if k == len(prog.steps):
                outs.append(client.finish(res))
                break
            choices = client.choose(k, res)
            labels = server.labels(k, choices)
            msgs = client.next_input(k, labels)
            online += len(choices) + len(labels) + sum(map(len, msgs))
        rep["online_s"] += time.perf_counter() - t1
        rep["online_bytes"] += online
    return np.concatenate(outs), rep


def prepare_server_layers(params: bfv.BfvParameters, prog: TwoPartyProgram, max_memory: int | None = None) -> list:
    """The server's layers of ``prog``: encoded transforms (latency mode, the largest lazy
    beyond ``max_memory``) or batch-axis kernels (throughput mode)."""
    if prog.batch_axis:
        return prepare_batch_layers(params, prog.layers or [])
    return prepare_layers(params, prog.layers or [], max_memory, [s.row_pairs for s in prog.segments])
