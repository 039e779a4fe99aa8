"""The two parties of an encrypted query: :class:`Client` (keys, encryption, decryption,
client-aided steps) and :class:`Server` (evaluation keys only), exchanging the messages of
:mod:`heinfer.protocol.messages` — the same bytes the network service carries."""

from heinfer.protocol.client import Client
from heinfer.protocol.server import Server

__all__ = ["Client", "Server"]
