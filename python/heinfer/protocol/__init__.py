"""The two parties of an encrypted query: :class:`Client` (public program, secret key,
encryption, decryption, steps) and :class:`Server` (full program, evaluation keys only),
exchanging the protobuf messages of :mod:`heinfer.protocol.messages` — the same bytes the
network service carries.

Layer: ``heinfer.protocol`` (imports program and runtime; never the service or the CLI).
"""

from heinfer.protocol.client import Client
from heinfer.protocol.limits import message_limits
from heinfer.protocol.server import Server

__all__ = ["Client", "Server", "message_limits"]
