"""TLS and mutual TLS settings of a service or a remote session (layer: ``heinfer.serve``).

One :class:`TlsConfig` type serves both ends (server = :func:`~heinfer.serve.serve`,
client = :func:`~heinfer.serve.connect`):

* ``cert_chain``, ``private_key``: the server's certificate chain and key (required for a
  TLS server); on a client, its certificate and key for mutual TLS.
* ``root_cert``: on a server, the CA that signs client certificates (required with mutual
  TLS); on a client, the CA that signs the server's certificate (system roots if ``None``).
* ``require_client_cert`` (server): refuse clients without a valid certificate (mutual TLS).
* ``server_name`` (client): the name to check the server's certificate against, when it
  differs from the host of the address.

PEM values are ``bytes`` (or ``str`` starting with ``-----BEGIN``), or paths that are read
when the credentials are built; :meth:`TlsConfig.from_files` reads them at once. The private
key is never shown by ``repr``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Union

import grpc

__all__ = ["Pem", "TlsConfig"]

#: PEM content (bytes, or text starting with ``-----BEGIN``) or a path to a PEM file.
Pem = Union[bytes, str, "os.PathLike[str]"]


def _read(value: Pem | None, what: str) -> bytes | None:
    """The PEM bytes of a value (read from its file if it is a path)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        with open(value, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(
            f"cannot read the TLS {what} {os.fspath(value)!r}: {e.strerror or e}"
        ) from None


@dataclass(frozen=True)
class TlsConfig:
    """Certificates and keys for TLS, and whether clients must present a certificate.

    Raises :class:`ValueError` when only one of ``cert_chain``/``private_key`` is given.
    """

    cert_chain: Pem | None = None
    private_key: Pem | None = field(default=None, repr=False)
    root_cert: Pem | None = None
    require_client_cert: bool = False
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_chain is None) != (self.private_key is None):
            raise ValueError("TLS needs both a certificate chain and its private key, or neither")

    @classmethod
    def from_files(
        cls,
        cert_chain: str | os.PathLike[str] | None = None,
        private_key: str | os.PathLike[str] | None = None,
        root_cert: str | os.PathLike[str] | None = None,
        require_client_cert: bool = False,
        server_name: str | None = None,
    ) -> TlsConfig:
        """Reads the PEM files now (so that a missing file fails at start-up)."""
        return cls(
            cert_chain=_read(cert_chain, "certificate chain"),
            private_key=_read(private_key, "private key"),
            root_cert=_read(root_cert, "root certificate"),
            require_client_cert=require_client_cert,
            server_name=server_name,
        )

    def server_credentials(self) -> grpc.ServerCredentials:
        """The credentials of a TLS server port.

        Raises :class:`ValueError` without a certificate and key, or when client
        certificates are required but no ``root_cert`` says who signs them.
        """
        if self.cert_chain is None:
            raise ValueError("a TLS server needs cert_chain and private_key")
        roots = _read(self.root_cert, "root certificate")
        if self.require_client_cert and roots is None:
            raise ValueError("require_client_cert needs root_cert (the CA of client certificates)")
        pair = (_read(self.private_key, "private key"), _read(self.cert_chain, "certificate chain"))
        return grpc.ssl_server_credentials(
            [pair], root_certificates=roots, require_client_auth=self.require_client_cert
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The credentials of a client channel (with a client certificate for mutual TLS)."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.root_cert, "root certificate"),
            private_key=_read(self.private_key, "private key"),
            certificate_chain=_read(self.cert_chain, "certificate chain"),
        )

    def channel_options(self) -> list[tuple[str, str]]:
        """Channel options this configuration adds (the name to verify the server as)."""
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]
