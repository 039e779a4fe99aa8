"""TLS and mutual TLS with a throwaway CA made by openssl at test time."""

from __future__ import annotations

import heinfer
import numpy as np
import pytest
from heinfer.errors import ServiceError
from heinfer.serve import TlsConfig, connect

from .conftest import mlp_input, tolerance


def test_config_checks_and_hides_the_key(pki) -> None:
    with pytest.raises(ValueError, match="both a certificate chain and its private key"):
        TlsConfig(cert_chain=b"x")
    with pytest.raises(ValueError, match="cannot read the TLS root certificate"):
        TlsConfig.from_files(root_cert="/nonexistent/ca.pem")
    with pytest.raises(ValueError, match="require_client_cert needs root_cert"):
        TlsConfig.from_files(
            pki.server_cert, pki.server_key, require_client_cert=True
        ).server_credentials()
    cfg = TlsConfig.from_files(pki.server_cert, pki.server_key)
    assert isinstance(cfg.private_key, bytes) and b"PRIVATE KEY" in cfg.private_key
    assert "PRIVATE" not in repr(cfg) and "private_key" not in repr(cfg)
    assert TlsConfig(root_cert=str(pki.ca)).channel_credentials() is not None  # a path works too


def test_tls_end_to_end_and_refusals(mlp, start, pki) -> None:
    h = start(mlp, tls=TlsConfig.from_files(pki.server_cert, pki.server_key), token="t0k3n")
    x = mlp_input()
    with connect(
        h.address, mlp.public(), tls=TlsConfig.from_files(root_cert=pki.ca), token="t0k3n"
    ) as s:
        got = s.infer(x)
    want = heinfer.infer(mlp, x)
    np.testing.assert_allclose(got.outputs, want.outputs, atol=tolerance(mlp))
    for tls in (None, TlsConfig.from_files(root_cert=pki.other_ca)):  # plaintext; untrusted CA
        with pytest.raises(ServiceError) as e:
            connect(h.address, mlp.public(), tls=tls, token="t0k3n", timeout_s=5)
        assert e.value.code == "UNAVAILABLE"
    with pytest.raises(ServiceError) as e:  # TLS is fine, the token is not
        connect(h.address, mlp.public(), tls=TlsConfig.from_files(root_cert=pki.ca), token="nope")
    assert e.value.code == "UNAUTHENTICATED"


def test_mutual_tls(mlp, start, pki) -> None:
    server = TlsConfig.from_files(pki.server_cert, pki.server_key, pki.ca, require_client_cert=True)
    h = start(mlp, tls=server)
    with connect(
        h.address, mlp.public(), tls=TlsConfig.from_files(pki.client_cert, pki.client_key, pki.ca)
    ) as s:
        s.infer(mlp_input())
    with pytest.raises(ServiceError) as e:  # no client certificate
        connect(h.address, mlp.public(), tls=TlsConfig.from_files(root_cert=pki.ca), timeout_s=5)
    assert e.value.code == "UNAVAILABLE"
    assert h.stats()["sessions_opened"] == 1


def test_server_name_override(mlp, start, pki) -> None:
    h = start(mlp, tls=TlsConfig.from_files(pki.server_cert, pki.server_key))
    port = h.port
    tls = TlsConfig.from_files(root_cert=pki.ca, server_name="localhost")
    with connect(f"127.0.0.1:{port}", mlp.public(), tls=tls) as s:
        s.infer(mlp_input())
    with pytest.raises(ServiceError):
        connect(
            h.address,
            mlp.public(),
            tls=TlsConfig.from_files(root_cert=pki.ca, server_name="evil.example"),
            timeout_s=5,
        )
