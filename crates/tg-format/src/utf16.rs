//! Lengths and offsets in UTF-16 code units.
//!
//! Telegram measures every text limit and every `MessageEntity` offset/length in UTF-16 code
//! units, while Rust strings are UTF-8. These helpers convert between the two. A character
//! outside the Basic Multilingual Plane (most emoji) is one `char`, four UTF-8 bytes and two
//! UTF-16 code units (a surrogate pair).

/// Number of UTF-16 code units in `s`.
pub fn len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// UTF-16 offset of byte index `byte_idx` of `s`.
///
/// Counts the code units of every character that starts before `byte_idx`, so an index inside a
/// multi-byte character counts that character, and an index past the end gives [`len`]`(s)`.
pub fn byte_to_utf16(s: &str, byte_idx: usize) -> usize {
    s.char_indices()
        .take_while(|&(i, _)| i < byte_idx)
        .map(|(_, c)| c.len_utf16())
        .sum()
}

/// Byte index of UTF-16 offset `u16_idx` of `s`.
///
/// `None` when the offset falls between the two halves of a surrogate pair or past the end;
/// `Some(s.len())` for the offset just past the last code unit.
pub fn utf16_to_byte(s: &str, u16_idx: usize) -> Option<usize> {
    let mut pos = 0;
    for (i, c) in s.char_indices() {
        if pos == u16_idx {
            return Some(i);
        }
        pos += c.len_utf16();
        if pos > u16_idx {
            return None;
        }
    }
    (pos == u16_idx).then_some(s.len())
}

/// The part of `s` that starts at UTF-16 offset `offset` and is `length` code units long.
///
/// `None` when either end falls inside a surrogate pair or past the end of `s`.
pub fn slice(s: &str, offset: usize, length: usize) -> Option<&str> {
    let start = utf16_to_byte(s, offset)?;
    let end = utf16_to_byte(s, offset.checked_add(length)?)?;
    s.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_counts_code_units() {
        assert_eq!(len(""), 0);
        assert_eq!(len("abc"), 3);
        // Cyrillic: two bytes per letter in UTF-8, one unit in UTF-16.
        assert_eq!(len("привет"), 6);
        // Astral emoji: a surrogate pair.
        assert_eq!(len("😀"), 2);
        assert_eq!(len("a😀b"), 4);
        // BMP symbol of three UTF-8 bytes.
        assert_eq!(len("€"), 1);
        // A flag is two regional indicators, each astral.
        assert_eq!(len("🇺🇦"), 4);
    }

    #[test]
    fn byte_to_utf16_maps_boundaries() {
        let s = "a😀бc";
        assert_eq!(byte_to_utf16(s, 0), 0);
        assert_eq!(byte_to_utf16(s, 1), 1);
        assert_eq!(byte_to_utf16(s, 5), 3);
        assert_eq!(byte_to_utf16(s, 7), 4);
        assert_eq!(byte_to_utf16(s, 8), 5);
        assert_eq!(byte_to_utf16(s, s.len()), len(s));
        // Past the end clamps to the full length.
        assert_eq!(byte_to_utf16(s, 100), len(s));
        // Inside the emoji counts the emoji.
        assert_eq!(byte_to_utf16(s, 2), 3);
    }

    #[test]
    fn utf16_to_byte_maps_boundaries() {
        let s = "a😀бc";
        assert_eq!(utf16_to_byte(s, 0), Some(0));
        assert_eq!(utf16_to_byte(s, 1), Some(1));
        assert_eq!(utf16_to_byte(s, 2), None, "inside the surrogate pair");
        assert_eq!(utf16_to_byte(s, 3), Some(5));
        assert_eq!(utf16_to_byte(s, 4), Some(7));
        assert_eq!(utf16_to_byte(s, 5), Some(8));
        assert_eq!(utf16_to_byte(s, 6), None, "past the end");
        assert_eq!(utf16_to_byte("", 0), Some(0));
        assert_eq!(utf16_to_byte("", 1), None);
    }

    #[test]
    fn round_trip_on_every_boundary() {
        let s = "Привет 😀 мир 🇺🇦!";
        for (i, _) in s.char_indices() {
            assert_eq!(utf16_to_byte(s, byte_to_utf16(s, i)), Some(i));
        }
    }

    #[test]
    fn slice_by_utf16() {
        let s = "😀 <b>x</b>";
        assert_eq!(slice(s, 0, 2), Some("😀"));
        assert_eq!(slice(s, 3, 3), Some("<b>"));
        assert_eq!(slice(s, 1, 2), None, "starts inside the emoji");
        assert_eq!(slice(s, 0, 1), None, "ends inside the emoji");
        assert_eq!(slice(s, 0, 100), None);
        assert_eq!(slice(s, len(s), 0), Some(""));
        assert_eq!(slice(s, usize::MAX, 1), None);
        assert_eq!(slice("привет", 2, 3), Some("иве"));
    }
}
