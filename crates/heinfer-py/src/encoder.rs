//! The encoder: numpy vectors ↔ plaintexts.

use crate::objects::{CompactPlaintext, Plaintext};
use crate::params::Params;
use crate::pool::run;
use heinfer_ckks as ckks;
use heinfer_ckks::CkksParams;
use num_complex::Complex64;
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

/// Copies a numpy array of any dimension, row-major (the copy is taken with the GIL held, so
/// no Python thread can write to the array while the engine reads it). A C-contiguous array
/// is one `memcpy`; any other layout goes element by element in row-major order. (numpy's
/// own `as_slice` also accepts a Fortran-ordered array, whose memory is column-major: a
/// transposed matrix would have been read in the wrong order.)
pub(crate) fn to_vec<T: numpy::Element + Copy, D: numpy::ndarray::Dimension>(
    a: &numpy::PyReadonlyArray<'_, T, D>,
) -> Vec<T> {
    let view = a.as_array();
    match view.as_slice() {
        Some(standard) => standard.to_vec(),
        None => view.iter().copied().collect(),
    }
}

/// The rows of a real matrix as complex slot values.
fn complex_rows(values: &PyReadonlyArray2<'_, f64>) -> Vec<Vec<Complex64>> {
    values
        .as_array()
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|&x| Complex64::new(x, 0.0)).collect())
        .collect()
}

/// Encodes and decodes vectors of up to `N/2` values.
#[pyclass(module = "heinfer._native", name = "Encoder", frozen)]
pub struct Encoder {
    inner: ckks::Encoder,
    params: CkksParams,
}

#[pymethods]
impl Encoder {
    #[new]
    fn new(py: Python<'_>, params: &Params) -> PyResult<Self> {
        let p = params.inner.clone();
        let inner = run(py, "Encoder.new", || Ok(ckks::Encoder::new(&p)))?;
        Ok(Self { inner, params: p })
    }
    /// Real values in the real parts of the slots; `extended` adds the special primes.
    fn encode_real(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray1<'_, f64>,
        scale: f64,
        level: usize,
        extended: bool,
    ) -> PyResult<Plaintext> {
        let z: Vec<Complex64> = to_vec(&values)
            .into_iter()
            .map(|x| Complex64::new(x, 0.0))
            .collect();
        self.encode_slots(py, z, scale, level, extended)
    }
    /// Every row of `values` (real values, as [`Self::encode_real`]) at the same `scale`,
    /// `level` and basis: one plaintext per row, the rows encoded in parallel on the pool
    /// (a program's diagonals are encoded this way at set-up). The first row that cannot be
    /// encoded fails the whole call.
    fn encode_real_many(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray2<'_, f64>,
        scale: f64,
        level: usize,
        extended: bool,
    ) -> PyResult<Vec<Plaintext>> {
        let params = &self.params;
        self.encode_rows(py, "Encoder.encode_real_many", &values, |z| {
            Ok(Plaintext {
                inner: self.encode_one(z, scale, level, extended)?,
                params: params.clone(),
            })
        })
    }
    /// [`Self::encode_real_many`] as compact plaintexts (each limb in the narrowest words its
    /// modulus allows), encoded straight into that form and sharing one buffer, freed with
    /// the last of them (`ckks::Encoder::encode_compact_many`).
    fn encode_real_many_compact(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray2<'_, f64>,
        scale: f64,
        level: usize,
        extended: bool,
    ) -> PyResult<Vec<CompactPlaintext>> {
        let rows = complex_rows(&values);
        let pts = run(py, "Encoder.encode_real_many_compact", || {
            self.inner
                .encode_compact_many(&rows, scale, level, extended)
        })?;
        Ok(pts
            .into_iter()
            .map(|inner| CompactPlaintext { inner })
            .collect())
    }
    /// Complex values, one per slot; `extended` adds the special primes.
    fn encode_complex(
        &self,
        py: Python<'_>,
        values: PyReadonlyArray1<'_, Complex64>,
        scale: f64,
        level: usize,
        extended: bool,
    ) -> PyResult<Plaintext> {
        self.encode_slots(py, to_vec(&values), scale, level, extended)
    }
    /// All `N/2` slots as complex values.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        pt: &Plaintext,
    ) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        let v = run(py, "Encoder.decode", || self.inner.decode(&pt.inner))?;
        Ok(PyArray1::from_vec(py, v))
    }
    /// The real parts of all `N/2` slots.
    fn decode_real<'py>(
        &self,
        py: Python<'py>,
        pt: &Plaintext,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let v = run(py, "Encoder.decode_real", || {
            self.inner.decode_real(&pt.inner)
        })?;
        Ok(PyArray1::from_vec(py, v))
    }
}

impl Encoder {
    /// Every row of `values` (as complex slots) encoded by `f`, in parallel on the pool; the
    /// first error fails the call.
    fn encode_rows<T: Send>(
        &self,
        py: Python<'_>,
        op: &'static str,
        values: &PyReadonlyArray2<'_, f64>,
        f: impl Fn(&[Complex64]) -> ckks::Result<T> + Sync,
    ) -> PyResult<Vec<T>> {
        use rayon::prelude::*;
        let rows = complex_rows(values);
        run(py, op, || {
            rows.par_iter()
                .map(|z| f(z))
                .collect::<ckks::Result<Vec<T>>>()
        })
    }
    /// One plaintext, in the extended basis `Q·P` when `extended`.
    fn encode_one(
        &self,
        z: &[Complex64],
        scale: f64,
        level: usize,
        extended: bool,
    ) -> ckks::Result<ckks::Plaintext> {
        if extended {
            self.inner.encode_extended(z, scale, level)
        } else {
            self.inner.encode(z, scale, level)
        }
    }

    fn encode_slots(
        &self,
        py: Python<'_>,
        z: Vec<Complex64>,
        scale: f64,
        level: usize,
        extended: bool,
    ) -> PyResult<Plaintext> {
        let inner = run(py, "Encoder.encode", || {
            self.encode_one(&z, scale, level, extended)
        })?;
        Ok(Plaintext {
            inner,
            params: self.params.clone(),
        })
    }
}
