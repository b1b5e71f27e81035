//! Shape of the generated Bot API table (`api_table.rs`); the table names these types, and the
//! lookups into it are in `api_lookup.rs`, so the types depend on nothing.

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
