//! The batch-axis kernels of `heinfer-kernels` over [`CiphertextBatch`]es: one Python call
//! per layer, never one per ciphertext.

use crate::batch::{kerr, run_k, CiphertextBatch};
use crate::errors::{guard, OperandError};
use crate::objects::{Ciphertext, RelinKey};
use heinfer_ckks::{Encoder, Evaluator};
use heinfer_kernels::linear::GroupSpec;
use heinfer_kernels::{batch, naive, Packing};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

/// `"real"`, `"complex"` or `"coeff"` → the kernels' packing.
fn parse_packing(name: &str) -> PyResult<Packing> {
    match name {
        "real" => Ok(Packing::Real),
        "complex" => Ok(Packing::Complex),
        "coeff" => Ok(Packing::Coefficients),
        other => Err(OperandError::new_err(format!(
            "unknown packing {other:?} (real, complex or coeff)"
        ))),
    }
}

/// A batch-axis linear layer with integer weights (see `heinfer_kernels::linear`).
#[pyclass(module = "heinfer._native", name = "LinearLayer", frozen)]
pub struct LinearLayer {
    inner: heinfer_kernels::LinearLayer,
}

#[pymethods]
impl LinearLayer {
    /// `groups`: list of `(rows uint32[r], cols uint32[c], weights float64[r, c])`.
    #[new]
    fn new(
        out_count: usize,
        in_count: usize,
        groups: Vec<(
            PyReadonlyArray1<'_, u32>,
            PyReadonlyArray1<'_, u32>,
            PyReadonlyArray2<'_, f64>,
        )>,
        weight_scale: f64,
        digits: usize,
    ) -> PyResult<Self> {
        let specs = groups
            .iter()
            .map(|(r, c, w)| GroupSpec {
                rows: r.as_array().to_vec(),
                cols: c.as_array().to_vec(),
                weights: w.as_array().iter().copied().collect(),
            })
            .collect();
        guard("LinearLayer.new", || {
            let inner =
                heinfer_kernels::LinearLayer::new(out_count, in_count, specs, weight_scale, digits)
                    .map_err(kerr)?;
            Ok(Self { inner })
        })
    }
    #[getter]
    fn nnz(&self) -> usize {
        self.inner.nnz()
    }
    #[getter]
    fn l1_max(&self) -> f64 {
        self.inner.l1_max()
    }
    #[getter]
    fn digits(&self) -> usize {
        self.inner.digits()
    }
    /// Applies the layer; `bias` (one per output) is added at the output scale, times
    /// to every item of the `packing` ("real", "complex", "coeff"). With `square`, every input is squared first, fused into
    /// the product (2-part inputs, 3-part outputs).
    #[pyo3(signature = (batch, bias=None, packing="real", square=false))]
    fn apply(
        &self,
        py: Python<'_>,
        batch: &CiphertextBatch,
        bias: Option<PyReadonlyArray1<'_, f64>>,
        packing: &str,
        square: bool,
    ) -> PyResult<CiphertextBatch> {
        let b: Option<Vec<f64>> = bias.map(|b| b.as_array().to_vec());
        let pk = parse_packing(packing)?;
        let cts = run_k(py, "LinearLayer.apply", || match &batch.narrow {
            Some(n) => self
                .inner
                .apply_narrow(&batch.params, n, b.as_deref(), pk, square),
            None if square => self
                .inner
                .apply_squared(&batch.params, &batch.cts, b.as_deref(), pk),
            None => self
                .inner
                .apply(&batch.params, &batch.cts, b.as_deref(), pk),
        })?;
        Ok(CiphertextBatch::wrap(cts, &batch.params))
    }
    /// The layer on a list of ciphertexts (no bias, real packing), read where they are and
    /// returned as new objects: no copy on either side (BFV's batch-axis layers, whose
    /// ciphertexts live in Python lists between steps).
    fn apply_list(
        &self,
        py: Python<'_>,
        cts: Vec<PyRef<'_, Ciphertext>>,
    ) -> PyResult<Vec<Ciphertext>> {
        let first = cts
            .first()
            .ok_or_else(|| OperandError::new_err("the layer needs at least one ciphertext"))?;
        let params = first.params.clone();
        let inputs: Vec<&heinfer_ckks::Ciphertext> = cts.iter().map(|c| &c.inner).collect();
        let out = run_k(py, "LinearLayer.apply_list", || {
            self.inner.apply(&params, &inputs, None, Packing::Real)
        })?;
        Ok(out
            .into_iter()
            .map(|c| Ciphertext::wrap(c, &params))
            .collect())
    }
}

/// `second(square(first(batch) + bias1)) + bias2` fused (see `heinfer_kernels::chain`).
#[pyfunction]
#[pyo3(signature = (first, second, batch, bias1=None, bias2=None, packing="real"))]
pub fn square_chain(
    py: Python<'_>,
    first: &LinearLayer,
    second: &LinearLayer,
    batch: &CiphertextBatch,
    bias1: Option<PyReadonlyArray1<'_, f64>>,
    bias2: Option<PyReadonlyArray1<'_, f64>>,
    packing: &str,
) -> PyResult<CiphertextBatch> {
    let b1: Option<Vec<f64>> = bias1.map(|b| b.as_array().to_vec());
    let pk = parse_packing(packing)?;
    let b2: Option<Vec<f64>> = bias2.map(|b| b.as_array().to_vec());
    let cts = run_k(py, "square_chain", || match &batch.narrow {
        Some(n) => heinfer_kernels::chain::square_chain_narrow(
            &batch.params,
            &first.inner,
            &second.inner,
            n,
            b1.as_deref(),
            b2.as_deref(),
            pk,
        ),
        None => heinfer_kernels::chain::square_chain(
            &batch.params,
            &first.inner,
            &second.inner,
            &batch.cts,
            b1.as_deref(),
            b2.as_deref(),
            pk,
        ),
    })?;
    Ok(CiphertextBatch::wrap(cts, &batch.params))
}

/// `ct²` for every ciphertext, in place (size 3, not relinearized).
#[pyfunction]
pub fn batch_square(py: Python<'_>, mut batch: PyRefMut<'_, CiphertextBatch>) -> PyResult<()> {
    let ev = Evaluator::new(&batch.params);
    let cts = batch.wide_mut()?;
    run_k(py, "batch_square", || batch::square(&ev, cts))
}

/// Relinearizes every ciphertext, in place.
#[pyfunction]
pub fn batch_relinearize(
    py: Python<'_>,
    mut batch: PyRefMut<'_, CiphertextBatch>,
    rlk: &RelinKey,
) -> PyResult<()> {
    let ev = Evaluator::new(&batch.params);
    let cts = batch.wide_mut()?;
    run_k(py, "batch_relinearize", || {
        batch::relinearize(&ev, cts, &rlk.inner)
    })
}

/// Divides every ciphertext by its last `times` primes, in place (one exact rounding by their
/// product: `heinfer_ckks::Evaluator::rescale_by_assign`).
#[pyfunction]
pub fn batch_rescale(
    py: Python<'_>,
    mut batch: PyRefMut<'_, CiphertextBatch>,
    times: usize,
) -> PyResult<()> {
    let ev = Evaluator::new(&batch.params);
    let cts = batch.wide_mut()?;
    run_k(py, "batch_rescale", || batch::rescale(&ev, cts, times))
}

/// Drops every ciphertext to `level`, in place.
#[pyfunction]
pub fn batch_drop_to_level(mut batch: PyRefMut<'_, CiphertextBatch>, level: usize) -> PyResult<()> {
    guard("batch_drop_to_level", || {
        batch::drop_to_level(batch.wide_mut()?, level).map_err(kerr)
    })
}

/// The baseline linear layer (general plaintext products, optional rescale per product) on
/// the output rows `rows` of the dense `weights`.
#[pyfunction]
pub fn naive_linear_rows(
    py: Python<'_>,
    batch: &CiphertextBatch,
    weights: PyReadonlyArray2<'_, f64>,
    bias: PyReadonlyArray1<'_, f64>,
    rows: Vec<usize>,
    weight_scale: f64,
    rescale_each: bool,
) -> PyResult<CiphertextBatch> {
    let (w, b, p) = naive_operands(batch, &weights, &bias);
    let inputs = batch.wide()?;
    let cts = run_k(py, "naive_linear_rows", || {
        let layer = naive::Dense {
            weights: &w,
            bias: &b,
            weight_scale,
            rescale_each,
        };
        naive::linear_rows(
            &Evaluator::new(&p),
            &Encoder::new(&p),
            &inputs,
            layer,
            &rows,
        )
    })?;
    Ok(CiphertextBatch::wrap(cts, &batch.params))
}

/// The baseline linear layer timed as nGraph-HE2 would run it: the general plaintexts of the
/// rows `rows` encoded first (once, like a compile step), then the products and sums alone.
/// Returns `(encode_seconds, compute_seconds)`; the output is dropped (benchmarks).
#[pyfunction]
pub fn naive_linear_rows_timed(
    py: Python<'_>,
    batch: &CiphertextBatch,
    weights: PyReadonlyArray2<'_, f64>,
    bias: PyReadonlyArray1<'_, f64>,
    rows: Vec<usize>,
    weight_scale: f64,
    rescale_each: bool,
) -> PyResult<(f64, f64)> {
    let (w, b, p) = naive_operands(batch, &weights, &bias);
    let inputs = batch.wide()?;
    run_k(py, "naive_linear_rows_timed", || {
        let layer = naive::Dense {
            weights: &w,
            bias: &b,
            weight_scale,
            rescale_each,
        };
        let (ev, enc) = (Evaluator::new(&p), Encoder::new(&p));
        let t0 = std::time::Instant::now();
        let encoded = naive::encode_rows(&ev, &enc, &inputs, layer, &rows)?;
        let t1 = std::time::Instant::now();
        drop(naive::apply_rows(
            &ev, &enc, &inputs, &encoded, layer, &rows,
        )?);
        let t2 = std::time::Instant::now();
        Ok(((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64()))
    })
}

/// Owned weights, bias and parameters of a baseline layer call (the pool runs without the GIL).
fn naive_operands(
    batch: &CiphertextBatch,
    weights: &PyReadonlyArray2<'_, f64>,
    bias: &PyReadonlyArray1<'_, f64>,
) -> (Vec<f64>, Vec<f64>, heinfer_ckks::CkksParams) {
    let w = weights.as_array().iter().copied().collect();
    (w, bias.as_array().to_vec(), batch.params.clone())
}
