//! Slots: the short name each topic holds at once (`A`…`Z`, then `AA`…`ZZ`: 702 in all).
//! Single letters come first: while one of the 26 is free a new topic gets one, so a person
//! with few pi never sees two letters. Allocation walks the persisted cursor forward within
//! its kind (wrapping `Z -> A`, `ZZ -> AA`) to the first slot nothing holds, so slots are
//! reused as late as possible and a topic's name stays recognisable.

use std::collections::HashSet;
use std::fmt;

/// The 26 letters slot names are made of.
pub const LETTERS: [char; 26] = [
    'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S',
    'T', 'U', 'V', 'W', 'X', 'Y', 'Z',
];

const SINGLE: u16 = 26;
/// How many topics can hold a slot at once.
pub const COUNT: usize = 26 + 26 * 26;

/// One slot: `0..26` are `A`…`Z`, `26..702` are `AA`…`ZZ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(u16);

impl Slot {
    /// The slot numbered `n` (`None` past the last).
    pub fn nth(n: usize) -> Option<Self> {
        (n < COUNT).then_some(Self(n as u16))
    }

    fn single(self) -> bool {
        self.0 < SINGLE
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = |i: u16| LETTERS[usize::from(i)];
        if self.single() {
            write!(f, "{}", letter(self.0))
        } else {
            let i = self.0 - SINGLE;
            write!(f, "{}{}", letter(i / SINGLE), letter(i % SINGLE))
        }
    }
}

/// The next free slot after `cursor`, preferring `preferred` when it is free: a single letter
/// while one is free, two letters after that.
pub fn next(cursor: Option<Slot>, held: &[Slot], preferred: Option<Slot>) -> Option<Slot> {
    let held: HashSet<Slot> = held.iter().copied().collect();
    if let Some(p) = preferred.filter(|p| !held.contains(p)) {
        return Some(p);
    }
    let walk = |range: std::ops::Range<u16>| {
        let len = range.end - range.start;
        let start = cursor
            .filter(|c| range.contains(&c.0))
            .map_or(0, |c| c.0 - range.start + 1);
        (0..len)
            .map(|k| Slot(range.start + (start + k) % len))
            .find(|s| !held.contains(s))
    };
    walk(0..SINGLE).or_else(|| walk(SINGLE..COUNT as u16))
}

/// Parses a stored slot (`A`…`Z`, `AA`…`ZZ`).
pub fn parse(s: &str) -> Option<Slot> {
    let index = |c: char| LETTERS.iter().position(|l| *l == c).map(|i| i as u16);
    let mut chars = s.chars();
    let first = index(chars.next()?)?;
    match (chars.next(), chars.next()) {
        (None, _) => Some(Slot(first)),
        (Some(c), None) => Some(Slot(SINGLE + first * SINGLE + index(c)?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> Slot {
        parse(name).unwrap_or_else(|| panic!("{name} is a slot"))
    }

    fn all() -> Vec<Slot> {
        (0..COUNT).filter_map(Slot::nth).collect()
    }

    #[test]
    fn walks_forward_and_wraps() {
        assert_eq!(next(None, &[], None), Some(s("A")));
        assert_eq!(next(Some(s("A")), &[s("A")], None), Some(s("B")));
        assert_eq!(
            next(Some(s("B")), &[], None),
            Some(s("C")),
            "letters are not reused early"
        );
        assert_eq!(next(Some(s("Z")), &[s("A")], None), Some(s("B")));
        assert_eq!(
            next(Some(s("C")), &[], Some(s("A"))),
            Some(s("A")),
            "a returning identity keeps its letter"
        );
        assert_eq!(next(Some(s("C")), &[s("A")], Some(s("A"))), Some(s("D")));
        assert_eq!(parse("Q"), Some(Slot(16)));
        assert_eq!(parse("QQQ"), None);
        assert_eq!(parse("q"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn two_letters_only_when_every_single_letter_is_held() {
        let singles: Vec<Slot> = all().into_iter().take(26).collect();
        assert_eq!(next(Some(s("Z")), &singles, None), Some(s("AA")));
        let mut held = singles.clone();
        held.push(s("AA"));
        assert_eq!(next(Some(s("AA")), &held, None), Some(s("AB")));
        // One letter freed while two-letter slots are in use: the short name again.
        held.retain(|h| *h != s("K"));
        assert_eq!(next(Some(s("AB")), &held, None), Some(s("K")));
        assert_eq!(next(None, &all(), None), None, "702 held: no slot");
        let mut but_one = all();
        but_one.retain(|h| *h != s("ZZ"));
        assert_eq!(next(Some(s("AA")), &but_one, None), Some(s("ZZ")));
        assert_eq!(next(Some(s("ZZ")), &singles, None), Some(s("AA")), "wraps");
    }

    #[test]
    fn every_slot_reads_back_as_itself() {
        let names: HashSet<String> = all().iter().map(Slot::to_string).collect();
        assert_eq!(names.len(), COUNT, "names are distinct");
        for slot in all() {
            let name = slot.to_string();
            assert!(name.len() <= 2);
            assert_eq!(parse(&name), Some(slot), "{name}");
        }
        assert_eq!(Slot::nth(26).map(|s| s.to_string()), Some("AA".into()));
        assert_eq!(
            Slot::nth(COUNT - 1).map(|s| s.to_string()),
            Some("ZZ".into())
        );
        assert_eq!(Slot::nth(COUNT), None);
    }
}
