//! Pairing codes: short, typeable on a phone, single use, stored only as a hash.

use sha2::{Digest, Sha256};

use crate::clock::{Clock, NoRandomness};

/// How long a code is valid.
pub const CODE_TTL_MS: i64 = 10 * 60 * 1000;
/// Wrong attempts before a code dies.
pub const CODE_ATTEMPTS: i64 = 5;

/// Letters and digits that cannot be mistaken for one another (no 0/O, 1/I/L).
const ALPHABET: &[u8; 31] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A fresh code: 8 characters (about 40 bits) from the clock's random source (the OS's, but
/// for a simulated clock).
pub fn new_code(clock: &Clock) -> Result<String, NoRandomness> {
    let mut bytes = [0u8; 8];
    clock.fill(&mut bytes)?;
    // 256 % 31 = 8: the bias towards the first 8 letters is tiny and harmless here.
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect())
}

/// The stored form of a code: SHA-256 of its normalised text, hex.
pub fn hash(code: &str) -> String {
    let normalised: String = code
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    Sha256::digest(normalised.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_typeable_and_hashes_normalise() {
        let code = new_code(&Clock::real()).unwrap_or_default();
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)));
        assert!(wire::secrets_match(&hash("abcd efgh"), &hash("ABCD-EFGH")));
        assert!(!wire::secrets_match(&hash("ABCDEFGH"), &hash("ABCDEFGJ")));
        assert_ne!(new_code(&Clock::real()).unwrap_or_default(), code);
    }
}
