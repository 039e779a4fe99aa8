//! The one place where engine errors become Python exceptions.
//!
//! The exception classes are defined in pure Python (`heinfer/errors.py`) so that they can
//! inherit from the natural builtin (`ValueError`, `LookupError`, …) and be documented there;
//! the native module imports them. The match below is exhaustive on purpose: a new engine
//! error variant does not compile until it is mapped.

use heinfer_ckks::serialize::DEFAULT_MAX_BYTES;
use heinfer_ckks::CkksError;
use heinfer_math::MathError;
use pyo3::PyErr;

pyo3::import_exception!(heinfer.errors, HeinferError);
pyo3::import_exception!(heinfer.errors, ParameterError);
pyo3::import_exception!(heinfer.errors, LevelError);
pyo3::import_exception!(heinfer.errors, ScaleError);
pyo3::import_exception!(heinfer.errors, MissingKeyError);
pyo3::import_exception!(heinfer.errors, SerializationError);
pyo3::import_exception!(heinfer.errors, EncodingError);
pyo3::import_exception!(heinfer.errors, OperandError);
pyo3::import_exception!(heinfer.errors, InternalError);
pyo3::import_exception!(heinfer.errors, ProtocolError);

/// Longest panic message passed on (characters): enough for any engine assertion.
const MAX_PANIC_MESSAGE: usize = 300;

/// Turns a caught panic into [`InternalError`] naming the operation and the panic message.
///
/// Engine panics are our own invariant checks (`assert!`, slice bounds): their messages carry
/// lengths and indices, never residues or key material.
pub fn panic_to_py(op: &str, payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let text = if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    };
    let text: String = text.chars().take(MAX_PANIC_MESSAGE).collect();
    InternalError::new_err(format!(
        "internal error in {op}: the engine panicked ({text}); this is a bug in heinfer, \
         please report it"
    ))
}

/// Runs engine code that needs the GIL (cheap calls that do not go to the pool), turning a
/// panic into [`InternalError`] like [`crate::pool::run`] does.
pub fn guard<T>(op: &str, f: impl FnOnce() -> pyo3::PyResult<T>) -> pyo3::PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(panic_to_py(op, p)))
}

/// Maps an engine error, variant by variant, onto its Python exception class.
pub fn to_py(e: CkksError) -> PyErr {
    let msg = e.to_string();
    match e {
        CkksError::InsecureParameters { .. }
        | CkksError::InvalidParameters(_)
        | CkksError::ParamsMismatch { .. } => ParameterError::new_err(msg),
        CkksError::LevelMismatch { .. }
        | CkksError::LevelTooLow { .. }
        | CkksError::LevelOutOfRange { .. } => LevelError::new_err(msg),
        CkksError::ScaleMismatch { .. } | CkksError::InvalidScale(_) => ScaleError::new_err(msg),
        CkksError::MissingGaloisKey(_) | CkksError::MissingRelinKey => {
            MissingKeyError::new_err(msg)
        }
        CkksError::InvalidOperand { .. } => OperandError::new_err(msg),
        CkksError::Encoding(_) => EncodingError::new_err(msg),
        CkksError::Deserialize { .. } => SerializationError::new_err(msg),
        CkksError::Math(m) => match m {
            MathError::PrimeGeneration(_) | MathError::NttPlan(_) => ParameterError::new_err(msg),
            MathError::InvalidGaloisElement { .. } => OperandError::new_err(msg),
            MathError::Entropy(_) => HeinferError::new_err(msg),
        },
    }
}

/// A `max_bytes` limit must be positive and at most the engine's default (1 GiB).
pub fn check_max_bytes(max_bytes: usize) -> Result<usize, CkksError> {
    if max_bytes == 0 || max_bytes > DEFAULT_MAX_BYTES {
        return Err(CkksError::Deserialize {
            what: "object",
            reason: format!("max_bytes = {max_bytes} is outside 1..={DEFAULT_MAX_BYTES}"),
        });
    }
    Ok(max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_bytes_bounds() {
        assert!(check_max_bytes(0).is_err());
        assert!(check_max_bytes(DEFAULT_MAX_BYTES + 1).is_err());
        assert_eq!(check_max_bytes(1).ok(), Some(1));
        assert_eq!(
            check_max_bytes(DEFAULT_MAX_BYTES).ok(),
            Some(DEFAULT_MAX_BYTES)
        );
    }
}
