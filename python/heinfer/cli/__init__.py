"""The ``heinfer`` command line (layer: ``heinfer.cli``; imports the service, never the
other way round).

::

    heinfer compile model.onnx -o model.hep [--mode throughput] [--calibration x.npz]
                                            # writes model.hep (server) and model.public.hep
    heinfer inspect model.hep [--json]
    heinfer serve model.hep --port 50051 [--tls-cert C --tls-key K [--tls-client-ca CA]]
    heinfer predict --server HOST:PORT --model model.public.hep inputs.npy -o out.npy [--json]

Modules: ``app`` (the group, ``compile``, ``inspect``), ``network`` (``serve``,
``predict``), ``files`` (files, secrets, one-line errors), ``describe`` (what ``inspect``
shows), ``progress`` (progress bars), ``process`` (``heinfer serve`` as a child process, for
the demo, the service benchmark and tests). Run as ``heinfer`` (console script) or
``python -m heinfer.cli``.
"""

from heinfer.cli.app import cli, main

__all__ = ["cli", "main"]
