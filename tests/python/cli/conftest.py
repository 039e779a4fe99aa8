"""Fixtures of the command-line tests: the throwaway certificate authority of the service
tests (made with ``openssl`` at test time)."""

from serve.conftest import pki  # noqa: F401 - a fixture, registered by being imported here
