//! Slots: at most 26 topics hold a letter at once. Allocation walks the persisted cursor
//! forward (wrapping `Z -> A`) to the first letter nothing holds, so letters are reused as late
//! as possible and a topic's letter stays recognisable.

pub const LETTERS: [char; 26] = [
    'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S',
    'T', 'U', 'V', 'W', 'X', 'Y', 'Z',
];

/// The next free slot after `cursor`, preferring `preferred` when it is free.
pub fn next(cursor: Option<char>, held: &[char], preferred: Option<char>) -> Option<char> {
    if let Some(p) = preferred.filter(|p| LETTERS.contains(p) && !held.contains(p)) {
        return Some(p);
    }
    let start = cursor
        .and_then(|c| LETTERS.iter().position(|l| *l == c))
        .map_or(0, |i| i + 1);
    (0..LETTERS.len())
        .map(|k| LETTERS[(start + k) % LETTERS.len()])
        .find(|l| !held.contains(l))
}

/// Parses a stored slot.
pub fn parse(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    (chars.next().is_none() && LETTERS.contains(&c)).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_forward_and_wraps() {
        assert_eq!(next(None, &[], None), Some('A'));
        assert_eq!(next(Some('A'), &['A'], None), Some('B'));
        assert_eq!(
            next(Some('B'), &[], None),
            Some('C'),
            "letters are not reused early"
        );
        assert_eq!(next(Some('Z'), &['A'], None), Some('B'));
        assert_eq!(
            next(Some('C'), &[], Some('A')),
            Some('A'),
            "a returning identity keeps its letter"
        );
        assert_eq!(next(Some('C'), &['A'], Some('A')), Some('D'));
        assert_eq!(next(Some('A'), &LETTERS, None), None);
        assert_eq!(parse("Q"), Some('Q'));
        assert_eq!(parse("QQ"), None);
    }
}
