use heinfer_2pc::ot::transpose::{columns_to_rows, transpose_128};
use heinfer_2pc::Block;
use proptest::prelude::*;

fn bit(b: Block, i: usize) -> bool {
    (b.0 >> i) & 1 == 1
}

/// Bit by bit: `out[j]` bit `i` = `m[i]` bit `j`.
fn naive(m: &[Block; 128]) -> [Block; 128] {
    let mut out = [Block::ZERO; 128];
    for (i, row) in m.iter().enumerate() {
        for (j, o) in out.iter_mut().enumerate() {
            if bit(*row, j) {
                o.0 |= 1u128 << i;
            }
        }
    }
    out
}

fn matrix(words: &[u128]) -> [Block; 128] {
    let mut m = [Block::ZERO; 128];
    for (b, w) in m.iter_mut().zip(words) {
        *b = Block(*w);
    }
    m
}

proptest! {
    #[test]
    fn transpose_128_matches_the_bitwise_reference(words in prop::collection::vec(any::<u128>(), 128)) {
        let m = matrix(&words);
        let mut fast = m;
        transpose_128(&mut fast);
        prop_assert_eq!(fast, naive(&m));
        transpose_128(&mut fast);
        prop_assert_eq!(fast, m);
    }

    #[test]
    fn columns_to_rows_matches_the_bitwise_reference(
        blocks in 1usize..4,
        seed in prop::collection::vec(any::<u128>(), 3 * 128),
    ) {
        let columns: Vec<Block> = seed[..128 * blocks].iter().map(|&w| Block(w)).collect();
        let mut rows = vec![Block::ZERO; 128 * blocks];
        columns_to_rows(&columns, blocks, &mut rows);
        for (r, row) in rows.iter().enumerate() {
            for i in 0..128 {
                let col_bit = bit(columns[i * blocks + r / 128], r % 128);
                prop_assert_eq!(bit(*row, i), col_bit);
            }
        }
    }
}

#[test]
fn transpose_of_single_bits() {
    for (i, j) in [(0, 0), (0, 127), (127, 0), (5, 77), (64, 63)] {
        let mut m = [Block::ZERO; 128];
        m[i] = Block(1u128 << j);
        transpose_128(&mut m);
        for (r, b) in m.iter().enumerate() {
            let want = if r == j {
                Block(1u128 << i)
            } else {
                Block::ZERO
            };
            assert_eq!(*b, want, "bit ({i}, {j})");
        }
    }
}
