//! The HomomorphicEncryption.org security table for uniform ternary secrets.
//!
//! Maximum `log2(Q·P)` for a ring degree `N = 2^logN` at a classical security level
//! (Albrecht et al., "Homomorphic Encryption Security Standard", 2018, Table for the ternary
//! distribution; the same numbers as SEAL's `util/globals.cpp` and CKKS.md). logN = 16 at 128
//! bits follows the same estimator (1772 bits, as in Lattigo); 192/256 bits are not tabulated
//! there for logN = 16, so such requests are refused.

/// A classical security level of the HomomorphicEncryption.org standard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityLevel {
    /// 128-bit classical security (the default).
    Bits128,
    /// 192-bit classical security.
    Bits192,
    /// 256-bit classical security.
    Bits256,
    /// No security at all: only for `INSECURE_*` test presets (small rings, fast tests).
    InsecureTestOnly,
}

impl SecurityLevel {
    /// The level in bits (0 for the insecure test level).
    pub fn bits(self) -> u32 {
        match self {
            Self::Bits128 => 128,
            Self::Bits192 => 192,
            Self::Bits256 => 256,
            Self::InsecureTestOnly => 0,
        }
    }

    /// Parses 128/192/256; anything else (including 0) is `None`: the insecure test level is
    /// never parsed from user input.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            128 => Some(Self::Bits128),
            192 => Some(Self::Bits192),
            256 => Some(Self::Bits256),
            _ => None,
        }
    }
}

/// Maximum `log2(Q·P)` for ring degree `2^log_n` at `level`, or `None` when the standard
/// gives no bound (then the parameters are refused).
pub fn max_log_qp(log_n: u32, level: SecurityLevel) -> Option<u32> {
    let table: &[(u32, u32)] = match level {
        SecurityLevel::Bits128 => &[
            (10, 27),
            (11, 54),
            (12, 109),
            (13, 218),
            (14, 438),
            (15, 881),
            (16, 1772),
        ],
        SecurityLevel::Bits192 => &[
            (10, 19),
            (11, 37),
            (12, 75),
            (13, 152),
            (14, 305),
            (15, 611),
        ],
        SecurityLevel::Bits256 => &[
            (10, 14),
            (11, 29),
            (12, 58),
            (13, 118),
            (14, 237),
            (15, 476),
        ],
        SecurityLevel::InsecureTestOnly => return Some(u32::MAX),
    };
    table.iter().find(|(l, _)| *l == log_n).map(|(_, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_the_standard() {
        assert_eq!(max_log_qp(13, SecurityLevel::Bits128), Some(218));
        assert_eq!(max_log_qp(14, SecurityLevel::Bits128), Some(438));
        assert_eq!(max_log_qp(15, SecurityLevel::Bits128), Some(881));
        assert_eq!(max_log_qp(15, SecurityLevel::Bits256), Some(476));
        assert_eq!(max_log_qp(16, SecurityLevel::Bits192), None);
    }
}
