"""Helpers of the protocol tests that play a tampering party: read a protobuf message's fields
and write the same message with some of them replaced."""

from __future__ import annotations

from heinfer.protocol.messages import decode, encode

#: ``max_drop_bits`` that accepts any rounded server output (``CiphertextBatch.from_bytes``):
#: the tests read what the server sends, rounded as ``heinfer.program.rounding`` allows.
ANY_ROUNDING = [126] * 5  # up to five parts (an open tail)


def fields(message: bytes) -> dict:
    """Every field of a message's body, by name."""
    _, body = decode(message)
    return {f.name: getattr(body, f.name) for f in body.DESCRIPTOR.fields}


def reencode(message: bytes, **replaced) -> bytes:
    """The same message with some fields replaced (``ciphertexts=`` for the payload)."""
    return encode(decode(message)[0], **{**fields(message), **replaced})


def payload(message: bytes) -> bytes:
    """The ciphertext bytes of a message."""
    return decode(message)[1].ciphertexts
