//! Shape of the generated Bot API table (`api_table.rs`) and lookups into it.

use crate::api_table::METHODS;

/// One documented parameter of a Bot API method.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// Parameter name as documented, e.g. `message_thread_id`.
    pub name: &'static str,
    /// Documented type, e.g. `Integer or String`, `Array of MessageEntity`, `InputFile or String`.
    pub ty: &'static str,
    /// `Yes` in the documentation's Required column.
    pub required: bool,
}

/// One documented Bot API method.
#[derive(Debug, Clone, Copy)]
pub struct MethodSpec {
    /// Method name in its documented case, e.g. `sendMessage`.
    pub name: &'static str,
    /// Parameters in documentation order.
    pub params: &'static [ParamSpec],
}

impl MethodSpec {
    /// The documented parameter called `name` (names are case-sensitive, as Telegram's are).
    pub fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}

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
