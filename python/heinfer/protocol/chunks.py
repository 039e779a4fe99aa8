"""Chunks: a query, a step or a reply as several messages (layer: ``heinfer.protocol``).

A message that carries ``n`` ciphertexts may travel as ``c`` messages (``1 ≤ c ≤ n``) so
that each side works on one chunk while the next one is on the wire: the client decrypts a
step's first chunk while the server still sends the rest, and encrypts a reply's next chunk
while the previous one travels. Chunk ``i`` holds ciphertexts ``[⌊i·n/c⌋, ⌊(i+1)·n/c⌋)``
— never empty, sizes differing by at most one — so the count of every chunk follows from
``n`` (the public program's) and ``c``; the message only chooses ``c`` among these fixed
splits. Chunks arrive in order, each once, all declaring the same ``c``
(:class:`Cursor`); anything else is a :class:`~heinfer.errors.ProtocolError`. A whole
message is chunk 0 of 1.
"""

from __future__ import annotations

from heinfer.errors import ProtocolError

__all__ = ["Cursor", "bounds", "chunks_for"]

#: Room for the fields of a message around its ciphertexts (ids, indices, tags, the batch
#: header): a chunk of ``k`` ciphertexts takes at most ``k · ciphertext bytes + this``.
MESSAGE_OVERHEAD = 512


def bounds(n: int, chunks: int, i: int) -> tuple[int, int]:
    """Ciphertexts ``[start, stop)`` of chunk ``i`` of ``chunks`` over ``n``."""
    return i * n // chunks, (i + 1) * n // chunks


def chunks_for(n: int, ciphertext_bytes: int, max_bytes: int | None) -> int:
    """The fewest chunks whose messages each fit in ``max_bytes`` (``None``: one chunk); at
    least one ciphertext per chunk, so at most ``n`` chunks even when one ciphertext exceeds
    ``max_bytes``."""
    if max_bytes is None or n <= 1:
        return 1
    per = max(1, (max_bytes - MESSAGE_OVERHEAD) // max(1, ciphertext_bytes))
    return min(n, -(-n // per))


class Cursor:
    """Where the chunks of one message stand: ``take(i, c)`` checks that chunk ``i`` of ``c``
    is the one expected and returns its ciphertext range; :attr:`done` after the last.
    ``what`` names the message in errors."""

    def __init__(self, n: int, what: str) -> None:
        self.n = n
        self.what = what
        self.chunks = 0
        self.next = 0

    @property
    def done(self) -> bool:
        """Whether every chunk has been taken."""
        return self.chunks > 0 and self.next == self.chunks

    @property
    def started(self) -> bool:
        """Whether a chunk has been taken."""
        return self.next > 0

    def take(self, i: int, chunks: int) -> tuple[int, int]:
        """The range of chunk ``i`` of ``chunks`` (:class:`ProtocolError` if it is not the
        next chunk of this message, or ``chunks`` is not what chunk 0 declared or is outside
        ``[1, n]``)."""
        if self.next == 0:
            if not 1 <= chunks <= self.n:
                raise ProtocolError(f"{self.what}: {chunks} chunks declared; between 1 and {self.n} (its ciphertexts)")
            self.chunks = chunks
        elif chunks != self.chunks:
            raise ProtocolError(f"{self.what}: chunk {i} declares {chunks} chunks, chunk 0 declared {self.chunks}")
        if self.done:
            raise ProtocolError(f"{self.what}: a chunk after the last one (replayed or forged)")
        if i != self.next:
            raise ProtocolError(f"{self.what}: chunk {i} where chunk {self.next} of {self.chunks} was expected (replayed, out of order or forged)")
        self.next += 1
        return bounds(self.n, self.chunks, i)
