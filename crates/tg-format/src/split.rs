//! Splitting plain text into messages Telegram accepts: at most `limit` UTF-16 units each, cut
//! at a paragraph break, else a line break, else a space, else anywhere (never inside a
//! surrogate pair).

use crate::utf16;

/// Splits `text` into pieces of at most `limit` UTF-16 units (`limit` > 1). Pieces are trimmed
/// of the whitespace at the cut; empty pieces are dropped.
pub fn plain(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(2);
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if utf16::len(rest) <= limit {
            out.push(rest.to_owned());
            break;
        }
        // The longest prefix that fits, in bytes, on a char boundary.
        let mut fit = 0;
        let mut units = 0;
        for (i, c) in rest.char_indices() {
            if units + c.len_utf16() > limit {
                break;
            }
            units += c.len_utf16();
            fit = i + c.len_utf8();
        }
        let window = &rest[..fit];
        // Prefer the last paragraph break, then line break, then space, in the second half of
        // the window so pieces do not get tiny.
        let min = fit / 2;
        let cut = ["\n\n", "\n", " "]
            .iter()
            .find_map(|sep| window.rfind(sep).filter(|i| *i >= min && *i > 0))
            .unwrap_or(fit);
        out.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    out.retain(|p| !p.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_piece() {
        assert_eq!(plain("  hello  ", 10), vec!["hello"]);
        assert!(plain("   ", 10).is_empty());
    }

    #[test]
    fn cuts_at_paragraphs_then_lines_then_words() {
        let text = format!("{}\n\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(plain(&text, 40), vec!["a".repeat(30), "b".repeat(30)]);
        let text = format!("{}\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(plain(&text, 40), vec!["a".repeat(30), "b".repeat(30)]);
        assert_eq!(plain("aaaa bbbb cccc", 10), vec!["aaaa bbbb", "cccc"]);
        assert_eq!(
            plain(&"x".repeat(25), 10),
            vec!["x".repeat(10), "x".repeat(10), "x".repeat(5)]
        );
    }

    #[test]
    fn every_piece_fits_in_utf16_units_and_nothing_is_lost() {
        let text = "😀 Привет, world! ".repeat(700);
        let pieces = plain(&text, 4096);
        assert!(pieces.len() > 1);
        assert!(pieces.iter().all(|p| utf16::len(p) <= 4096));
        let joined: String = pieces.join(" ");
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(squash(&joined), squash(&text));
        // Never inside a surrogate pair even with a hard cut.
        let emojis = "😀".repeat(10);
        let p = plain(&emojis, 5);
        assert!(
            p.iter()
                .all(|s| utf16::len(s) <= 5 && s.chars().all(|c| c == '😀'))
        );
        assert_eq!(p.concat(), emojis);
    }
}
