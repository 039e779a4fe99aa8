//! Additive element-wise kernels (`+`, `−`, negation, doubling) over residues in `[0, q)`:
//! one conditional subtraction each, vectorized by the compiler under AVX-512 or AVX2.

use super::*;

macro_rules! elementwise {
    ($(#[$doc:meta])* $name:ident ($($arg:ident : $ty:ty),*) $body:block) => {
        $(#[$doc])*
        #[inline]
        pub fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if has_avx512() {
                return unsafe { avx512::with_avx512(|| $body) };
            }
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: the process runs the AVX2 family only on a CPU with AVX2.
                return unsafe { avx2::with_avx2(|| $body) };
            }
            $body
        }
    };
}

elementwise!(
    /// `a[i] ← a[i] + b[i] mod q`.
    add_assign(a: &mut [u64], b: &[u64], q: u64) {
        for (x, &y) in a.iter_mut().zip(b) { *x = small_mod(*x + y, q); }
    }
);
elementwise!(
    /// `out[i] ← a[i] + b[i] mod q`.
    add_into(out: &mut [u64], a: &[u64], b: &[u64], q: u64) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) { *o = small_mod(x + y, q); }
    }
);
elementwise!(
    /// `a[i] ← a[i] − b[i] mod q`.
    sub_assign(a: &mut [u64], b: &[u64], q: u64) {
        for (x, &y) in a.iter_mut().zip(b) { *x = small_mod(*x + q - y, q); }
    }
);
elementwise!(
    /// `out[i] ← a[i] − b[i] mod q`.
    sub_into(out: &mut [u64], a: &[u64], b: &[u64], q: u64) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) { *o = small_mod(x + q - y, q); }
    }
);
elementwise!(
    /// `a[i] ← 2·a[i] mod q`.
    add_self_assign(a: &mut [u64], q: u64) {
        for x in a.iter_mut() { *x = small_mod(*x + *x, q); }
    }
);
elementwise!(
    /// `a[i] ← −a[i] mod q`.
    neg_assign(a: &mut [u64], q: u64) {
        for x in a.iter_mut() { *x = small_mod(q - *x, q); }
    }
);
elementwise!(
    /// `a[i] ← a[i] + c mod q` for a constant `c < q`.
    add_scalar_assign(a: &mut [u64], c: u64, q: u64) {
        for x in a.iter_mut() { *x = small_mod(*x + c, q); }
    }
);

elementwise!(
    /// `out[i] ← a[i] + b[i] mod q` into uninitialized memory (every element is written).
    add_to_uninit(out: &mut [MaybeUninit<u64>], a: &[u64], b: &[u64], q: u64) {
        assert!(out.len() == a.len() && a.len() == b.len());
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) { o.write(small_mod(x + y, q)); }
    }
);
elementwise!(
    /// `out[i] ← a[i] − b[i] mod q` into uninitialized memory (every element is written).
    sub_to_uninit(out: &mut [MaybeUninit<u64>], a: &[u64], b: &[u64], q: u64) {
        assert!(out.len() == a.len() && a.len() == b.len());
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) { o.write(small_mod(x + q - y, q)); }
    }
);
