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
elementwise!(
    /// `out[i] ← [y[i]]_q + c[i]·w mod q` for any 64-bit `y[i]`, flags `c[i] ∈ {0, 1}`, `w < q`,
    /// `2^20 ≤ q < 2^62` and `q_inv = 1/q` (correctly rounded): a basis conversion from one
    /// prime (a ModUp digit of one prime, ModDown by one special prime), whose weights are 1
    /// and `[−q_src]_q`, with no product. The quotient `⌊y·q_inv⌋` is within one of `⌊y/q⌋`
    /// (its relative error is below `2^{-51}` and `y/q < 2^{44}`), so `y − ⌊y·q_inv⌋·q` lies in
    /// `(−q, 2q)` and one correction each way reduces it.
    reduce_add_select_into(out: &mut [u64], y: &[u64], c: &[u64], w: u64, q: u64, q_inv: f64) {
        let qi = q as i64;
        for ((o, &x), &b) in out.iter_mut().zip(y).zip(c) {
            // SAFETY: x·q_inv is finite and in [0, 2^45): it converts exactly to its integer
            // part (the unchecked conversion vectorizes where the saturating `as` does not:
            // measured 18 % slower rotations at logN = 13). The block is nested in the
            // AVX-512 expansion's own `unsafe`, hence the allowance.
            #[allow(unused_unsafe)]
            let t: u64 = unsafe { (x as f64 * q_inv).to_int_unchecked() };
            let r = x.wrapping_sub(t.wrapping_mul(q)) as i64;
            let r = if r < 0 { r + qi } else if r >= qi { r - qi } else { r };
            *o = small_mod(r as u64 + (w & b.wrapping_neg()), q);
        }
    }
);
elementwise!(
    /// `c[i] ← c[i] + [y[i] > half]`: the balanced conversion's correction, counted one source
    /// limb at a time.
    count_above(c: &mut [u64], y: &[u64], half: u64) {
        for (ci, &v) in c.iter_mut().zip(y) { *ci += u64::from(v > half); }
    }
);
