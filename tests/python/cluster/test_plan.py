"""The shard plan, the worker and the batch joining, without Ray (``heinfer.cluster``)."""

from __future__ import annotations

import sys

import heinfer
import numpy as np
import pytest
from heinfer.cluster import NetworkModel, shard_plan
from heinfer.cluster.plan import contiguous_blocks, output_bytes, prepared_bytes, row_groups
from heinfer.cluster.wire import join_batches
from heinfer.cluster.worker import ShardWorker
from heinfer.protocol.messages import decode
from heinfer.runtime.executor import Executor, native_params

from cluster.conftest import as_batch
from heinfer.protocol.trace import segment_inputs


@pytest.mark.parametrize("rows,parts", [(845, 2), (10, 3), (3, 8), (1, 1), (100, 7)])
def test_row_groups_cover_every_row_once(rows, parts):
    groups = row_groups(rows, parts)
    assert len(groups) == min(rows, parts)
    covered = [r for a, b in groups for r in range(a, b)]
    assert covered == list(range(rows))
    sizes = [b - a for a, b in groups]
    assert max(sizes) - min(sizes) <= 1


def test_plan_splits_by_rows_only_when_the_network_pays(relu_net):
    fast = shard_plan(relu_net, 2, network=NetworkModel(bandwidth=1e12, latency=0.0))
    assert [s.how for s in fast.segments] == ["rows"] * 3
    assert fast.segments[0].groups == ((0, 422), (422, 845))
    slow = shard_plan(relu_net, 2, network=NetworkModel(bandwidth=1e6))
    assert [s.how for s in slow.segments] == ["queries"] * 3
    assert shard_plan(relu_net, 1).segments[0].how == "queries"
    assert all("segment" in line for line in fast.describe())


def test_plan_prices_the_outputs_the_server_sends(relu_net, digits):
    """A shard's output bytes are the rounded step the server sends, to the byte."""
    client, server = heinfer.Client(relu_net.public()), heinfer.Server(relu_net)
    session = server.open_session(client.keys_message())
    step = server.begin(client.query_message(session, digits[0][:8]))
    sent = len(decode(step)[1].ciphertexts)
    assert output_bytes(relu_net, 0, relu_net.segments[0].n_output_cts) == sent
    assert shard_plan(relu_net, 2, split="rows").segments[0].out_bytes == sent


def test_plan_refuses_what_it_cannot_do(relu_net, squares):
    with pytest.raises(ValueError, match="split"):
        shard_plan(relu_net, 2, split="pipelines")
    with pytest.raises(ValueError, match="workers"):
        shard_plan(relu_net, 0)
    # Two linear layers in one segment (square fused between them): never split by rows.
    plan = shard_plan(squares, 2, split="auto", network=NetworkModel(bandwidth=1e12, latency=0.0))
    assert plan.segments[0].how == "queries" and "more than one linear" in plan.segments[0].why


def test_latency_segments_split_when_it_pays(latency_net, relu_net):
    assert [latency_net.layers[s.ops[0].layer].n_out for s in latency_net.segments] == [2, 1]
    channels = shard_plan(latency_net, 2, split="channels", network=NetworkModel(bandwidth=1e12, latency=0.0))
    assert [s.how for s in channels.segments] == ["channels", "queries"]
    assert channels.segments[0].groups == ((0, 1), (1, 2)) and "does not apply" in channels.segments[1].why
    assert "2 groups of output ciphertexts" in channels.describe()[0]
    # by giant steps: groups of about equal terms; the second layer has one group, no split
    giant = shard_plan(latency_net, 2, split="giant-steps")
    assert [s.how for s in giant.segments] == ["giant-steps", "queries"]
    (a, b), (c, d) = giant.segments[0].groups
    assert a == 0 and b == c and d == len(latency_net.layers[0].groups())
    assert "2 groups of giant steps" in giant.describe()[0]
    # auto: the split that saves most net of its transfers, when the network is fast enough
    fast = shard_plan(latency_net, 2, network=NetworkModel(bandwidth=1e12, latency=0.0))
    assert fast.segments[0].how in ("channels", "giant-steps") and "saves" in fast.segments[0].why
    assert fast.segments[1].how == "queries" and "one output ciphertext and one giant-step group" in fast.segments[1].why
    slow = shard_plan(latency_net, 2, network=NetworkModel(bandwidth=1e5))
    assert [s.how for s in slow.segments] == ["queries"] * 2 and "would save" in slow.segments[0].why
    assert [s.how for s in shard_plan(latency_net, 1, split="channels").segments] == ["queries"] * 2
    assert [s.how for s in shard_plan(latency_net, 1, split="giant-steps").segments] == ["queries"] * 2
    # each split applies to its own kind of segment, and refuses a program without any
    with pytest.raises(heinfer.NotSupportedYetError, match="split='channels'"):
        shard_plan(latency_net, 2, split="rows")
    with pytest.raises(heinfer.NotSupportedYetError, match="split='rows'"):
        shard_plan(relu_net, 2, split="channels")


def test_output_ciphertext_groups_on_a_worker_are_exactly_the_whole_segment(latency_net, digits):
    """Each output ciphertext of a group is bit-for-bit the in-process one (the same baby
    steps, products, giant steps, folds, rescale and bias), and the groups join to the whole."""
    from compiler import onnx_models as om

    x = om.random_input((32,), 1, seed=5)
    (data, relin, galois), (data1, _, _) = segment_inputs(latency_net, x, keys=True)
    worker = ShardWorker(latency_net.to_bytes(), False, 1)
    worker.put_keys("s", (relin.to_bytes() if relin is not None else None, galois.to_bytes()))
    want = Executor(latency_net).run(0, as_batch(latency_net, data), relin, galois).to_bytes()
    parts = [worker.run(0, data, 1 << 20, "s", g) for g in ((0, 1), (1, 2))]
    assert join_batches(native_params(latency_net.params), parts, 2).to_bytes() == want
    assert worker.run(0, data, 1 << 20, "s", None).tobytes() == want
    # a worker told that segment 0 is split prepares it by groups only, and whole on demand
    lean = ShardWorker(latency_net.to_bytes(), False, 1, None, (0,))
    lean.put_keys("s", (relin.to_bytes() if relin is not None else None, galois.to_bytes()))
    assert lean.executor.segments == [1] and lean.held() == [0, 1]
    assert join_batches(native_params(latency_net.params), [lean.run(0, data, 1 << 20, "s", g) for g in ((0, 1), (1, 2))], 2).to_bytes() == want
    assert lean.run(0, data, 1 << 20, "s", None).tobytes() == want
    tile = ShardWorker(latency_net.to_bytes(), False, 1, [1])
    with pytest.raises(heinfer.ProtocolError, match="not segment 0"):
        tile.run(0, data, 1 << 20, None, None)
    # a group of all outputs is the whole segment
    want1 = Executor(latency_net).run(1, as_batch(latency_net, data1), relin, galois).to_bytes()
    assert worker.run(1, data1, 1 << 20, "s", (0, 1)).tobytes() == want1


def test_giant_step_shards_summed_on_a_worker_are_exactly_the_whole_segment(latency_net):
    """Each shard's sums (its giant-step groups' products and rotations, zero where none
    reaches an output) add up, exactly, to the whole transform's; finishing them (folds,
    rescale, bias) gives the in-process output bit for bit, whichever the partition."""
    from compiler import onnx_models as om

    x = om.random_input((32,), 1, seed=5)
    (data, relin, galois), _ = segment_inputs(latency_net, x, keys=True)
    worker = ShardWorker(latency_net.to_bytes(), False, 1, None, (0,))
    worker.put_keys("s", (relin.to_bytes() if relin is not None else None, galois.to_bytes()))
    want = Executor(latency_net).run(0, as_batch(latency_net, data), relin, galois).to_bytes()
    n = len(latency_net.layers[0].groups())
    assert n >= 3, n  # else the partitions below are not three different ones
    mid = n // 2
    for cuts in ([0, mid, n], [0, 1, 2, n], [0, n]):
        sums = [worker.run(0, data, 1 << 20, "s", ("giant", a, b)) for a, b in zip(cuts, cuts[1:])]
        got = worker.run(0, sums, 1 << 20, "s", ("finish", len(sums)))
        assert got.tobytes() == want, cuts
    sums = [worker.run(0, data, 1 << 20, "s", ("giant", a, b)) for a, b in ((0, mid), (mid, n))]
    with pytest.raises(heinfer.ProtocolError, match="giant-step shards"):
        worker.run(0, sums, 1 << 20, "s", ("finish", 3))
    with pytest.raises(heinfer.CompileError, match="giant-step groups"):
        worker.run(0, data, 1 << 20, "s", ("giant", 5, n + 1))


def test_row_groups_on_a_worker_are_exactly_the_whole_segment(relu_net, digits):
    """Each output ciphertext of a row group is bit-for-bit the in-process one."""
    inputs = segment_inputs(relu_net, digits[0][:40])
    worker = ShardWorker(relu_net.to_bytes(), False, 1)
    ex = Executor(relu_net)
    params = native_params(relu_net.params)
    for k, data in enumerate(inputs):
        want = ex.run(k, as_batch(relu_net, data), None, None).to_bytes()
        rows = relu_net.layers[k].out_size
        groups = row_groups(rows, 3)
        parts = [worker.run(k, data, len(as_batch(relu_net, data)), None, g) for g in groups]
        assert join_batches(params, parts, rows).to_bytes() == want
        assert worker.run(k, data, 1 << 20, None, None).tobytes() == want
        # the input as the server's chunks (several batches, as Ray ships them): the same
        b = as_batch(relu_net, data)
        n = len(b)
        chunks = [b.to_bytes(0, n // 3 or 1), *([b.to_bytes(n // 3 or 1, n)] if n > 1 else [])]
        arrays = [np.frombuffer(c, np.uint8) for c in chunks]
        assert worker.run(k, arrays, n, None, None).tobytes() == want
        if n > 1:
            with pytest.raises(heinfer.ProtocolError, match="more ciphertexts than its segment takes"):
                worker.run(k, arrays, n // 3 or 1, None, None)


def test_a_worker_reads_a_segment_s_input_in_32_bit_words(monkeypatch):
    """A batch-axis segment whose primes are below 2^32 and whose first op is a linear layer:
    the worker decodes its input narrow (whole or in chunks) and answers bit for bit as the
    in-process executor does with 64-bit words."""
    from compiler import onnx_models as om
    from heinfer.runtime import executor as executor_mod

    shape = (1, 8, 8)
    prog = heinfer.compile(
        om.conv_net(shape, channels=4, act="square", classes=10, seed=31), mode="throughput",
        calibration=om.random_input(shape, 32, seed=32), batch_size=8,
    )
    assert max(prog.params["log_q"]) < 32
    (data,) = segment_inputs(prog, om.random_input(shape, 8, seed=37))
    want = Executor(prog).run(0, as_batch(prog, data), None, None).to_bytes()
    seen = []
    real = executor_mod.run_batch_segment
    monkeypatch.setattr(executor_mod, "run_batch_segment", lambda seg, batch, *a, **kw: seen.append(batch.is_narrow) or real(seg, batch, *a, **kw))
    worker = ShardWorker(prog.to_bytes(), False, 1)
    n = len(as_batch(prog, data))
    assert worker.run(0, data, n, None, None).tobytes() == want
    b = as_batch(prog, data)
    chunks = [np.frombuffer(c, np.uint8) for c in (b.to_bytes(0, n // 3), b.to_bytes(n // 3, n))]
    assert worker.run(0, chunks, n, None, None).tobytes() == want
    assert seen == [True, True]


def test_join_refuses_a_wrong_count(relu_net, digits):
    data = segment_inputs(relu_net, digits[0][:8])[2]
    params = native_params(relu_net.params)
    with pytest.raises(heinfer.ClusterError, match="ciphertexts"):
        join_batches(params, [data, data], 2 * len(as_batch(relu_net, data)) + 1)
    with pytest.raises(heinfer.ClusterError, match="not a ciphertext batch"):
        join_batches(params, [b"nonsense-bytes"], 1)


def test_missing_ray_names_the_extra(monkeypatch):
    from heinfer.cluster.local import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(heinfer.ClusterError, match=r"heinfer\[ray\]"):
        require_ray()


def test_worker_without_keys_says_so(squares):
    worker = ShardWorker(squares.to_bytes(), False, 1)
    with pytest.raises(KeyError, match="no keys"):
        worker.run(0, b"", 1, "nope", None)
    assert np.isfinite(worker.ping())


def test_inspect_shows_the_shard_plan(tmp_path, relu_net):
    from click.testing import CliRunner
    from heinfer.cli import cli

    path = tmp_path / "net.hep"
    path.write_bytes(relu_net.to_bytes())
    r = CliRunner().invoke(cli, ["inspect", str(path), "--ray-workers", "2"])
    assert r.exit_code == 0, r.output
    assert "shard plan on 2 Ray worker(s)" in r.stdout and "segment 1: rows" in r.stdout
    r = CliRunner().invoke(cli, ["inspect", str(path), "--ray-workers", "3", "--json"])
    import json

    shards = json.loads(r.stdout)["shards"]
    assert shards["workers"] == 3 and len(shards["segments"]) == 3
    r = CliRunner().invoke(cli, ["inspect", str(path), "--ray-workers", "2", "--ray-split", "layers", "--json"])
    assert r.exit_code == 0, r.output
    tiles = json.loads(r.stdout)["shards"]
    assert tiles["split"] == "layers" and {s["worker"] for s in tiles["segments"]} == {0, 1}
    r = CliRunner().invoke(cli, ["inspect", str(path), "--ray-workers", "2", "--ray-split", "channels"])
    assert r.exit_code == 2 and "split='rows'" in r.output  # no latency-mode segment to split


def test_giant_steps_apply_to_latency_mode_only(relu_net):
    with pytest.raises(heinfer.NotSupportedYetError, match="split='rows'"):
        shard_plan(relu_net, 2, split="giant-steps")


def test_a_program_too_large_for_one_worker_needs_layer_tiles(relu_net):
    from heinfer.cluster import RayExecutor

    sizes = [prepared_bytes(relu_net, k) for k in range(3)]
    with pytest.raises(heinfer.NotSupportedYetError, match="split='layers'"):
        RayExecutor(relu_net, workers=2, max_worker_bytes=sum(sizes) - 1)
    with pytest.raises(heinfer.ClusterError, match="more workers"):
        RayExecutor(relu_net, workers=2, split="layers", max_worker_bytes=max(sizes) - 1)


@pytest.mark.parametrize(
    "sizes,blocks,want",
    [([5, 1, 1, 1, 5], 2, [0, 0, 1, 1, 1]), ([1, 2, 3], 3, [0, 1, 2]), ([10, 1, 1, 1], 2, [0, 1, 1, 1]), ([3], 1, [0]), ([0, 0, 0], 2, [0, 1, 1])],
)
def test_contiguous_blocks_cut_the_largest_block_least(sizes, blocks, want):
    assert contiguous_blocks(sizes, blocks) == want


def test_layer_tiles_give_each_worker_a_contiguous_block(relu_net, latency_net):
    sizes = [prepared_bytes(relu_net, k) for k in range(3)]
    plan = shard_plan(relu_net, 2, split="layers")
    owners = [s.worker for s in plan.segments]
    assert owners == contiguous_blocks(sizes, 2) and set(owners) == {0, 1}
    assert all(s.how == "layers" for s in plan.segments)
    assert plan.held_by(0) + plan.held_by(1) == [0, 1, 2]
    assert "held and run by worker" in plan.describe()[0]
    # more workers than segments: one segment each, the others hold nothing
    many = shard_plan(latency_net, 5, split="layers")
    assert [s.worker for s in many.segments] == [0, 1] and many.held_by(4) == []
    assert shard_plan(relu_net, 2).held_by(0) is None  # other splits: the whole program


def test_an_executor_of_some_segments_runs_those_alone(relu_net, digits):
    inputs = segment_inputs(relu_net, digits[0][:16])
    whole, part = Executor(relu_net), Executor(relu_net, segments=[1])
    assert part.segments == [1] and set(part.built) == {1} and whole.built.keys() == {0, 1, 2}
    assert part.run(1, as_batch(relu_net, inputs[1]), None, None).to_bytes() == whole.run(1, as_batch(relu_net, inputs[1]), None, None).to_bytes()
    with pytest.raises(heinfer.ProtocolError, match="not segment 0"):
        part.run(0, as_batch(relu_net, inputs[0]), None, None)
    with pytest.raises(heinfer.ProtocolError, match="do not exist"):
        Executor(relu_net, segments=[3])


def test_a_server_refuses_an_executor_of_another_program(relu_net, squares):
    from heinfer.protocol import Server

    with pytest.raises(heinfer.ProtocolError, match="another program"):
        Server(relu_net, executor=Executor(squares))
    assert Server(relu_net, executor=Executor(relu_net)).executor.program is relu_net
