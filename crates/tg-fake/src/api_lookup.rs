//! Lookups into the generated Bot API table.

use crate::api_spec::MethodSpec;
use crate::api_table::METHODS;

/// Looks a method up case-insensitively, as Telegram does ("All methods in the Bot API are
/// case-insensitive").
pub fn method(name: &str) -> Option<&'static MethodSpec> {
    METHODS
        .binary_search_by(|m| cmp_ignore_case(m.name, name))
        .ok()
        .map(|i| &METHODS[i])
}

fn cmp_ignore_case(a: &str, b: &str) -> std::cmp::Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_for_binary_search() {
        for pair in METHODS.windows(2) {
            assert_eq!(
                cmp_ignore_case(pair[0].name, pair[1].name),
                std::cmp::Ordering::Less,
                "{} !< {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        let m = method("SENDMESSAGE").map(|m| m.name);
        assert_eq!(m, Some("sendMessage"));
        assert!(method("sendMessages").is_none());
        let send = method("sendMessage").map(|m| {
            (
                m.param("text").map(|p| p.required),
                m.param("nope").is_none(),
            )
        });
        assert_eq!(send, Some((Some(true), true)));
        assert_eq!(method("getMe").map(|m| m.params.len()), Some(0));
    }
}
