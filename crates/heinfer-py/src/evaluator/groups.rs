//! The plaintexts of the evaluator's grouped sums (`dot_plain_groups` and its extended
//! form) as they come from Python: one kind per call, checked against the groups' terms.

use crate::objects::{CompactPlaintext, Plaintext};
use pyo3::prelude::*;

/// The plaintexts of a grouped sum: every one a `Plaintext`, or every one a
/// `CompactPlaintext` (one kind per call).
#[derive(FromPyObject)]
pub enum GroupPlaintexts<'py> {
    Wide(Vec<Vec<PyRef<'py, Plaintext>>>),
    Compact(Vec<Vec<PyRef<'py, CompactPlaintext>>>),
}

/// The engine's plaintexts of each group.
pub fn inner_refs<'a, W: pyo3::PyClass, P>(
    pts: &'a [Vec<PyRef<'_, W>>],
    f: impl Fn(&'a W) -> &'a P,
) -> Vec<Vec<&'a P>> {
    pts.iter()
        .map(|g| g.iter().map(|p| f(&**p)).collect())
        .collect()
}

/// `(terms, plaintexts)` of each group, refusing lists of different lengths.
pub fn groups_of<'a, P>(
    terms: &'a [Vec<usize>],
    pts: &'a [Vec<&'a P>],
) -> PyResult<Vec<(&'a [usize], &'a [&'a P])>> {
    if terms.len() != pts.len() {
        return Err(crate::errors::OperandError::new_err(format!(
            "{} groups of terms but {} groups of plaintexts",
            terms.len(),
            pts.len()
        )));
    }
    Ok(terms
        .iter()
        .zip(pts)
        .map(|(t, p)| (t.as_slice(), p.as_slice()))
        .collect())
}

/// `body` with `groups` bound to the `(terms, plaintexts)` of each group of `pts` (a
/// [`GroupPlaintexts`]) — one expansion per plaintext kind, as the engine's sums are generic.
macro_rules! with_groups {
    ($pts:expr, $terms:expr, |$groups:ident| $body:expr) => {
        match &$pts {
            $crate::evaluator::groups::GroupPlaintexts::Wide(pts) => {
                let p = $crate::evaluator::groups::inner_refs(pts, |p| &p.inner);
                let $groups = $crate::evaluator::groups::groups_of(&$terms, &p)?;
                $body
            }
            $crate::evaluator::groups::GroupPlaintexts::Compact(pts) => {
                let p = $crate::evaluator::groups::inner_refs(pts, |p| &p.inner);
                let $groups = $crate::evaluator::groups::groups_of(&$terms, &p)?;
                $body
            }
        }
    };
}
pub(crate) use with_groups;
