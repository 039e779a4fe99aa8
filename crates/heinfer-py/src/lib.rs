//! # heinfer-py — the private native module `heinfer._native`
//!
//! Binding layer of heinfer (see `ARCHITECTURE.md`): thin PyO3 wrappers around the types of
//! `heinfer-ckks` and `heinfer-bfv`, the kernels of `heinfer-kernels` and the two-party step of `heinfer-2pc`,
//! nothing else. The public, typed, documented Python API is the pure-Python
//! package `heinfer` (`python/heinfer/ckks/`), which wraps these classes.
//!
//! * Every operation that costs more than a few microseconds runs with the GIL released, on
//!   the module's rayon pool ([`pool::run`]): other Python threads keep running meanwhile.
//! * Every [`heinfer_ckks::CkksError`] becomes an instance of one of the exception classes
//!   defined in `heinfer/errors.py` ([`errors::to_py`]); caller input never panics.
//! * Every call into engine code catches panics ([`pool::run`], [`errors::guard`]): a bug in
//!   the engine arrives as `heinfer.errors.InternalError` (a `HeinferError`), never as pyo3's
//!   `PanicException`, which derives from `BaseException`.
//! * Every wrapped object keeps the parameters it belongs to, so it can serialize itself.

// This crate is an extension module with no Rust users: its documentation is read with
// `--document-private-items`, so links to its private modules are the point.
#![allow(rustdoc::private_intra_doc_links)]

mod batch;
mod bfv;
mod encoder;
mod encrypt_bytes;
mod errors;
mod evaluator;
mod filled;
mod kernels;
mod keygen;
mod malloc;
mod objects;
mod params;
mod pool;
mod twoparty;

use pyo3::prelude::*;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The native module: classes are registered under their Python names.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    malloc::tune();
    pool::warm_from_env()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_MAX_BYTES",
        heinfer_ckks::serialize::DEFAULT_MAX_BYTES,
    )?;
    m.add_function(wrap_pyfunction!(pool::set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(pool::get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(pool::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(pool::_set_warm_us, m)?)?;
    m.add_class::<params::Params>()?;
    m.add_class::<objects::Plaintext>()?;
    m.add_class::<objects::CompactPlaintext>()?;
    m.add_class::<objects::Ciphertext>()?;
    m.add_class::<objects::ExtendedCiphertext>()?;
    m.add_class::<objects::SecretKey>()?;
    m.add_class::<objects::PublicKey>()?;
    m.add_class::<objects::RelinKey>()?;
    m.add_class::<objects::GaloisKeys>()?;
    m.add_class::<keygen::KeyGenerator>()?;
    m.add_class::<keygen::Encryptor>()?;
    m.add_class::<keygen::Decryptor>()?;
    m.add_class::<encoder::Encoder>()?;
    m.add_class::<evaluator::Evaluator>()?;
    m.add_class::<batch::CiphertextBatch>()?;
    m.add_class::<bfv::BfvParams>()?;
    m.add_class::<bfv::BfvMultiplier>()?;
    m.add_class::<bfv::BfvEncoder>()?;
    m.add_class::<bfv::BfvEvaluator>()?;
    m.add_class::<bfv::BfvDecryptor>()?;
    m.add_class::<bfv::BfvRerandomizer>()?;
    m.add_function(wrap_pyfunction!(bfv::bfv_flood_bits, m)?)?;
    m.add_function(wrap_pyfunction!(bfv::bfv_uniform_mod, m)?)?;
    m.add_function(wrap_pyfunction!(bfv::bfv_plain_primes, m)?)?;
    m.add("BFV_MAX_FLOOD_BITS", heinfer_bfv::MAX_FLOOD_BITS)?;
    m.add_class::<kernels::LinearLayer>()?;
    m.add_class::<twoparty::PyLayerCircuit>()?;
    m.add_class::<twoparty::TwoPartyClient>()?;
    m.add_class::<twoparty::TwoPartyServer>()?;
    m.add_class::<twoparty::TwoPartyClientStep>()?;
    m.add_class::<twoparty::TwoPartyServerStep>()?;
    m.add("TWO_PARTY_MAX_INSTANCES", twoparty::MAX_INSTANCES)?;
    m.add_function(wrap_pyfunction!(batch::encrypt_batch, m)?)?;
    m.add_function(wrap_pyfunction!(batch::decrypt_batch, m)?)?;
    m.add_function(wrap_pyfunction!(batch::encrypt_batch_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(encrypt_bytes::encrypt_batch_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(
        encrypt_bytes::encrypt_batch_coefficients_bytes,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(batch::decrypt_batch_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::batch_square, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::square_chain, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::batch_relinearize, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::batch_rescale, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::batch_drop_to_level, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::naive_linear_rows, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::naive_linear_rows_timed, m)?)?;
    Ok(())
}
