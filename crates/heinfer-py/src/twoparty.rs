//! Bindings of `heinfer-2pc`: the non-linear step of GAZELLE's two-party protocol (garbled
//! circuits + oblivious transfer on additive shares mod p). Each party is a state machine that
//! takes and returns `bytes`; the typed API is `heinfer.twoparty`.

use heinfer_2pc::gc::layers::{Layer, LayerCircuit};
use heinfer_2pc::nonlinear::{self, ClientSession, ClientStep, ServerSession, ServerStep};
use heinfer_2pc::rng::os_rng;
use heinfer_2pc::TwoPartyError;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{OperandError, ProtocolError, SerializationError};
use crate::filled::filled_bytes;
use crate::pool::run_with;
use heinfer_ckks as ckks;

/// Maps a two-party error onto its Python class.
fn to_py(e: TwoPartyError) -> PyErr {
    let msg = e.to_string();
    match e {
        TwoPartyError::Deserialize { .. } => SerializationError::new_err(msg),
        TwoPartyError::Protocol(_) => ProtocolError::new_err(msg),
        TwoPartyError::InvalidArgument(_) => OperandError::new_err(msg),
        TwoPartyError::Randomness(_) => crate::errors::HeinferError::new_err(msg),
    }
}

/// The circuit of one non-linear layer: `kind` "relu", "maxpool_relu" (with `window`
/// values per instance), "truncate" (the signed floor alone, before an AHE square) or "clip"
/// (to `[lo, hi]`, signed integers at the input's scale: ReLU6), plaintext modulus `p`,
/// truncation `shift` bits.
#[pyclass(module = "heinfer._native", name = "LayerCircuit", frozen)]
pub struct PyLayerCircuit {
    inner: LayerCircuit,
}

#[pymethods]
impl PyLayerCircuit {
    #[new]
    #[pyo3(signature = (kind, p, shift, window = 1, lo = 0, hi = 0))]
    fn new(kind: &str, p: u64, shift: usize, window: usize, lo: i64, hi: i64) -> PyResult<Self> {
        let layer = match kind {
            "relu" => Layer::Relu,
            "maxpool_relu" => Layer::MaxPoolRelu { window },
            "truncate" => Layer::Truncate,
            "clip" => Layer::Clip { lo, hi },
            other => {
                return Err(OperandError::new_err(format!(
                    "unknown non-linear layer {other:?}: relu, maxpool_relu, truncate or clip"
                )))
            }
        };
        Ok(PyLayerCircuit {
            inner: LayerCircuit::new(layer, p, shift).map_err(to_py)?,
        })
    }
    /// AND gates per instance.
    #[getter]
    fn and_gates(&self) -> usize {
        self.inner.circuit.and_count()
    }
    /// Values per instance.
    #[getter]
    fn arity(&self) -> usize {
        self.inner.arity()
    }
    /// Bits per share.
    #[getter]
    fn bits(&self) -> usize {
        self.inner.bits
    }
    fn __repr__(&self) -> String {
        format!(
            "LayerCircuit({:?}, p={}, shift={}, and_gates={})",
            self.inner.layer,
            self.inner.p,
            self.inner.shift,
            self.inner.circuit.and_count()
        )
    }
}

fn bytes<'py>(py: Python<'py>, v: Vec<u8>) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &v)
}

/// The client's session: OT receiver. `TwoPartyClient()` returns it and its first message.
#[pyclass(module = "heinfer._native", name = "TwoPartyClient")]
pub struct TwoPartyClient {
    inner: ClientSession,
}

#[pymethods]
impl TwoPartyClient {
    /// `(session, setup message)`.
    #[staticmethod]
    fn start(py: Python<'_>) -> PyResult<(TwoPartyClient, Bound<'_, PyBytes>)> {
        let (inner, msg) = run_with(
            py,
            "TwoPartyClient.start",
            || ClientSession::new(&mut os_rng()?),
            to_py,
        )?;
        Ok((TwoPartyClient { inner }, bytes(py, msg)))
    }
    /// Completes the set-up with the server's reply.
    fn finish_setup(&mut self, py: Python<'_>, msg: &[u8]) -> PyResult<()> {
        let inner = &mut self.inner;
        run_with(
            py,
            "TwoPartyClient.finish_setup",
            || inner.finish_setup(msg),
            to_py,
        )
    }
    /// `(step, offline request)` for `instances` copies of `layer`.
    fn offline<'py>(
        &mut self,
        py: Python<'py>,
        layer: &PyLayerCircuit,
        instances: usize,
    ) -> PyResult<(TwoPartyClientStep, Bound<'py, PyBytes>)> {
        let inner = &mut self.inner;
        let (step, msg) = run_with(
            py,
            "TwoPartyClient.offline",
            || inner.offline(&layer.inner, instances, &mut os_rng()?),
            to_py,
        )?;
        Ok((TwoPartyClientStep { inner: step }, bytes(py, msg)))
    }
}

/// The server's session: OT sender. `TwoPartyServer.start(msg)` returns it and its reply.
#[pyclass(module = "heinfer._native", name = "TwoPartyServer")]
pub struct TwoPartyServer {
    inner: ServerSession,
}

#[pymethods]
impl TwoPartyServer {
    /// `(session, setup reply)` from the client's set-up message.
    #[staticmethod]
    fn start<'py>(py: Python<'py>, msg: &[u8]) -> PyResult<(TwoPartyServer, Bound<'py, PyBytes>)> {
        let (inner, reply) = run_with(
            py,
            "TwoPartyServer.start",
            || ServerSession::new(msg, &mut os_rng()?),
            to_py,
        )?;
        Ok((TwoPartyServer { inner }, bytes(py, reply)))
    }
    /// `(step, offline reply)`: draws the masks and garbles `instances` copies of `layer`.
    /// `sources` (optional, `uint32`, one per circuit input, instance-major): the value each
    /// input reads, numbered from 0 — inputs that read one value get one mask (overlapping
    /// or padded pooling windows).
    #[pyo3(signature = (layer, instances, msg, sources = None))]
    fn offline<'py>(
        &mut self,
        py: Python<'py>,
        layer: &PyLayerCircuit,
        instances: usize,
        msg: &[u8],
        sources: Option<PyReadonlyArray1<'py, u32>>,
    ) -> PyResult<(TwoPartyServerStep, Bound<'py, PyBytes>)> {
        let sources = sources.map(|a| a.as_array().to_vec());
        let inner = &mut self.inner;
        let (step, reply) = run_with(
            py,
            "TwoPartyServer.offline",
            || {
                let src = sources.as_deref();
                inner.offline_reply(&layer.inner, instances, src, msg, &mut os_rng()?)
            },
            to_py,
        )?;
        // written once, straight into the message object (the garbled tables are most of it),
        // not zeroed first, with the GIL released
        let msg = filled_bytes(py, "TwoPartyServer.offline", &[], reply.byte_len(), |buf| {
            let mut rest: &mut [u8] = buf;
            let written = reply.write_to(&mut rest);
            match written {
                Ok(()) if rest.is_empty() => Ok(()),
                _ => Err(ckks::CkksError::InvalidOperand {
                    op: "TwoPartyServer.offline",
                    reason: "the reply did not fill its message".into(),
                }),
            }
        })?;
        Ok((TwoPartyServerStep { inner: step }, msg))
    }
}

/// The client's side of one step.
#[pyclass(module = "heinfer._native", name = "TwoPartyClientStep")]
pub struct TwoPartyClientStep {
    inner: ClientStep,
}

#[pymethods]
impl TwoPartyClientStep {
    fn receive_offline(&mut self, py: Python<'_>, msg: &[u8]) -> PyResult<()> {
        let inner = &mut self.inner;
        run_with(
            py,
            "TwoPartyClientStep.receive_offline",
            || inner.receive_offline(msg),
            to_py,
        )
    }
    /// The OT choices for the client's shares (uint64, each below p).
    fn choose<'py>(
        &mut self,
        py: Python<'py>,
        shares: PyReadonlyArray1<'py, u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let c = shares.as_slice()?.to_vec();
        let inner = &mut self.inner;
        let msg = run_with(py, "TwoPartyClientStep.choose", || inner.choose(&c), to_py)?;
        Ok(bytes(py, msg))
    }
    /// Evaluates the circuits with the server's labels: the client's new shares.
    fn finish<'py>(&mut self, py: Python<'py>, msg: &[u8]) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let inner = &mut self.inner;
        let z = run_with(py, "TwoPartyClientStep.finish", || inner.finish(msg), to_py)?;
        Ok(z.into_pyarray(py))
    }
}

/// The server's side of one step.
#[pyclass(module = "heinfer._native", name = "TwoPartyServerStep")]
pub struct TwoPartyServerStep {
    inner: ServerStep,
}

#[pymethods]
impl TwoPartyServerStep {
    /// The masks r the server adds to the encrypted values (uint64, one per input value).
    fn masks<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.inner.masks().to_vec().into_pyarray(py)
    }
    /// The server's shares of the outputs (uint64, one per instance).
    fn output_shares<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.inner.output_shares().into_pyarray(py)
    }
    /// Answers the client's choices with its input labels.
    fn labels<'py>(&mut self, py: Python<'py>, msg: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let reply = run_with(py, "TwoPartyServerStep.labels", || inner.labels(msg), to_py)?;
        Ok(bytes(py, reply))
    }
}

/// Most instances of one step.
pub const MAX_INSTANCES: usize = nonlinear::MAX_INSTANCES;
