"""The inference API exists by name and refuses clearly until it lands."""

import pytest

import heinfer


@pytest.mark.parametrize(
    "call",
    [
        lambda: heinfer.compile("model.onnx", mode="throughput"),
        lambda: heinfer.infer(object(), [[0.0]]),
        lambda: heinfer.Client(),
        lambda: heinfer.Server(),
    ],
)
def test_entry_points_raise_not_supported_yet(call):
    with pytest.raises(heinfer.NotSupportedYetError, match="not supported yet"):
        call()


def test_not_supported_yet_is_a_heinfer_error_and_not_implemented():
    assert issubclass(heinfer.NotSupportedYetError, heinfer.HeinferError)
    assert issubclass(heinfer.NotSupportedYetError, NotImplementedError)
