//! The cache of Galois permutation tables stays bounded however many elements are used,
//! and rotations stay correct when their tables were evicted.
mod common;
use common::*;
use heinfer_ckks::galois_tables::GALOIS_TABLE_CACHE_CAPACITY;
use heinfer_ckks::*;

#[test]
fn every_galois_element_of_the_ring_stays_within_capacity() {
    let params = presets::insecure_logn10().unwrap();
    let two_n = 2 * params.n() as u64;
    for g in (1..two_n).step_by(2) {
        let t = params.galois_table(g).unwrap();
        assert_eq!(t.len(), params.n());
        assert!(params.cached_galois_tables() <= GALOIS_TABLE_CACHE_CAPACITY);
    }
    assert_eq!(params.cached_galois_tables(), GALOIS_TABLE_CACHE_CAPACITY);
    assert!(params.galois_table(2).is_err() && params.galois_table(two_n + 1).is_err());
}

#[test]
fn many_rotation_keys_bound_the_cache_and_rotations_stay_correct() {
    let steps: Vec<i64> = (1..=(GALOIS_TABLE_CACHE_CAPACITY as i64 + 40)).collect();
    let f = Fixture::new(presets::insecure_logn10().unwrap(), &steps);
    let p = &f.params;
    // key generation touched each element and its inverse: far more than the capacity
    assert!(p.cached_galois_tables() <= GALOIS_TABLE_CACHE_CAPACITY);
    let x = vector(p.slots(), 7);
    let ct = f.encrypt(&x);
    for &k in steps
        .iter()
        .step_by(9)
        .chain([steps[0], *steps.last().unwrap()].iter())
    {
        let out = f.decrypt(&f.ev.rotate(&ct, k, &f.gks).unwrap());
        let slots = p.slots();
        let err = (0..slots)
            .map(|i| (out[i] - x[(i + k as usize) % slots]).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-3, "rotation by {k}: error {err}");
        assert!(p.cached_galois_tables() <= GALOIS_TABLE_CACHE_CAPACITY);
    }
}
