//! The byte layer of the wire format: header, little-endian scalars, bit-packed residues (see
//! [`super::pack`]), and a bounds-checked reader that turns every short read into a `Deserialize` error.

use super::{Kind, FORMAT_VERSION, HEADER_BYTES, MAGIC};
use crate::error::{CkksError, Result};
use crate::params::CkksParams;
use crate::poly::RnsPoly;
use heinfer_math::sampler::Seed;

use super::pack::{modulus_bits, pack_residues, packed_len, unpack_residues, Unpack};

pub(super) struct Writer {
    pub(super) buf: Vec<u8>,
}

impl Writer {
    pub(super) fn new(kind: Kind, params_id: u64) -> Self {
        Self::with_capacity(kind, params_id, 64)
    }
    /// A writer whose buffer holds `capacity` bytes before it grows: the exact size of what
    /// is written, when the caller knows it, spares the copies of a growing vector (a
    /// ciphertext's second polynomial copied its first one; 2.5 % of a CryptoNets-ReLU query).
    pub(super) fn with_capacity(kind: Kind, params_id: u64, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(HEADER_BYTES));
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf.push(kind as u8);
        buf.push(0);
        buf.extend_from_slice(&params_id.to_le_bytes());
        Self { buf }
    }
    pub(super) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(super) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// Bit-packs every limb at the width of its modulus (see [`pack_residues`] for the bit
    /// layout). Each limb starts on a byte boundary and takes `⌈n·bits/8⌉` bytes.
    pub(super) fn poly(&mut self, params: &CkksParams, p: &RnsPoly, moduli: &[usize]) {
        let inner = params.inner();
        let widths = moduli.iter().map(|&mi| modulus_bits(inner.moduli[mi].q));
        self.buf
            .reserve(widths.clone().map(|b| packed_len(p.n(), b)).sum());
        for (i, (&mi, bits)) in moduli.iter().zip(widths).enumerate() {
            let limb = p.limb(i);
            debug_assert!(
                limb.iter().all(|&x| x < inner.moduli[mi].q),
                "limb {i} holds a residue at or above its modulus"
            );
            pack_residues(limb, bits, &mut self.buf);
        }
    }
}

pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(super) fn err(&self, reason: impl Into<String>) -> CkksError {
        CkksError::Deserialize {
            what: self.what,
            reason: reason.into(),
        }
    }
    /// A reader over `bytes`, a part of this one's input, reporting errors as this one does
    /// (e.g. one of several fixed-size records parsed in parallel).
    pub(super) fn part(&self, bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            buf: bytes,
            pos: 0,
            what: self.what,
        }
    }
    /// Bytes not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(super) fn take(&mut self, k: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < k {
            return Err(self.err(format!(
                "truncated: needed {k} more bytes at offset {}",
                self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + k];
        self.pos += k;
        Ok(s)
    }
    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    pub(super) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    pub(super) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    pub(super) fn seed(&mut self) -> Result<Seed> {
        Ok(self.take(32)?.try_into().expect("32"))
    }
    /// Reads a polynomial whose limbs were written by [`Writer::poly`] for the same `moduli`.
    ///
    /// Refuses (with a `Deserialize` error) truncated input, any residue at or above its
    /// modulus (reporting the first one, limb by limb) and non-zero padding bits at the end of
    /// a limb.
    pub(super) fn poly(&mut self, params: &CkksParams, moduli: &[usize]) -> Result<RnsPoly> {
        // filled limb after limb by appending: no zero-fill pass over the whole polynomial
        let mut data = Vec::new();
        self.poly_into(params, moduli, &mut data)?;
        Ok(RnsPoly::from_data(data, params.n()))
    }
    /// Reads and validates a polynomial over `moduli` (every residue below its modulus, zero
    /// padding), appending its residues to `data` (a scratch buffer when only checking).
    pub(super) fn poly_into(
        &mut self,
        params: &CkksParams,
        moduli: &[usize],
        data: &mut Vec<u64>,
    ) -> Result<()> {
        let inner = params.inner();
        let n = params.n();
        // the level (hence the limb count) came from the bytes: allocate only once the bytes
        // of every limb are known to be there
        let need = poly_wire_bytes(params, moduli);
        if self.remaining() < need {
            return Err(self.err(format!(
                "truncated: needed {need} more bytes at offset {}",
                self.pos
            )));
        }
        data.reserve(n * moduli.len());
        for (i, &mi) in moduli.iter().enumerate() {
            let q = inner.moduli[mi].q;
            let bits = modulus_bits(q);
            let src = self.take(packed_len(n, bits))?;
            match unpack_residues(src, bits, q, n, data) {
                Ok(()) => {}
                Err(Unpack::Residue { value, .. }) => {
                    return Err(self.err(format!(
                        "residue {value} in limb {i} is not below its modulus {q}"
                    )))
                }
                Err(Unpack::Padding) => return Err(self.err("non-zero padding bits")),
            }
        }
        Ok(())
    }
    pub(super) fn finish(&self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(self.err(format!("{} trailing bytes", self.buf.len() - self.pos)));
        }
        Ok(())
    }
}

/// Opens `bytes` as an object of `kind`: checks the size limit and the header.
/// Returns the reader positioned after the header and the parameter id found.
pub(super) fn open(bytes: &[u8], kind: Kind, max_bytes: usize) -> Result<(Reader<'_>, u64)> {
    let mut r = Reader {
        buf: bytes,
        pos: 0,
        what: kind.name(),
    };
    if bytes.len() > max_bytes {
        return Err(r.err(format!(
            "{} bytes exceed the limit of {max_bytes}",
            bytes.len()
        )));
    }
    if r.take(4)? != MAGIC {
        return Err(r.err("bad magic (not a heinfer object)"));
    }
    let version = u16::from_le_bytes(r.take(2)?.try_into().expect("2"));
    if version == 1 {
        return Err(r.err(format!(
            "format version 1, written by an older heinfer whose seeds expand under ChaCha20 \
             (this build reads {FORMAT_VERSION}: seeds expand under AES-256-CTR); make the keys and \
             ciphertexts again with this version"
        )));
    }
    if version != FORMAT_VERSION {
        return Err(r.err(format!(
            "unsupported format version {version} (this build reads {FORMAT_VERSION})"
        )));
    }
    let k = r.u8()?;
    if k != kind as u8 {
        return Err(r.err(format!(
            "object kind {k} is not {} ({})",
            kind as u8,
            kind.name()
        )));
    }
    let flags = r.u8()?;
    if flags != 0 {
        return Err(r.err(format!("unknown flags {flags:#x}")));
    }
    let id = r.u64()?;
    Ok((r, id))
}

pub(super) fn open_for<'a>(
    params: &CkksParams,
    bytes: &'a [u8],
    kind: Kind,
    max_bytes: usize,
) -> Result<Reader<'a>> {
    let (r, id) = open(bytes, kind, max_bytes)?;
    if id != params.id() {
        return Err(r.err(format!(
            "parameter id {id:#018x} does not match these parameters ({:#018x})",
            params.id()
        )));
    }
    Ok(r)
}

/// Bytes of a polynomial over the moduli of table indices `moduli`, as [`Writer::poly`]
/// writes it: one bit-packed limb per modulus.
pub(super) fn poly_wire_bytes(params: &CkksParams, moduli: &[usize]) -> usize {
    let inner = params.inner();
    moduli
        .iter()
        .map(|&mi| packed_len(params.n(), modulus_bits(inner.moduli[mi].q)))
        .sum()
}
