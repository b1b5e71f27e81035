//! Runtime values: what the caller knows at run time (`{file}`, `{mime}`, `{text}`, `{ogg}`...).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One runtime (or default) value: a string, or a list of strings for `{items[index]}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A single string.
    Text(String),
    /// A list of strings, selected item by item with `{name[index]}`.
    List(Vec<String>),
}

impl Value {
    /// Truthiness, as used by `{value??fallback}`, `{flag?yes:no}` and `when`: the empty string,
    /// `0`, `false` (any case) and the empty list are false; everything else is true.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Text(s) => text_is_truthy(s),
            Value::List(items) => !items.is_empty(),
        }
    }
}

pub(crate) fn text_is_truthy(s: &str) -> bool {
    !(s.is_empty() || s == "0" || s.eq_ignore_ascii_case("false"))
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Text(s.clone())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Text(b.to_string())
    }
}

/// A path becomes its text; a path that is not valid UTF-8 is converted lossily.
impl From<&Path> for Value {
    fn from(p: &Path) -> Self {
        Value::Text(p.to_string_lossy().into_owned())
    }
}

/// A path becomes its text; a path that is not valid UTF-8 is converted lossily.
impl From<PathBuf> for Value {
    fn from(p: PathBuf) -> Self {
        Value::from(p.as_path())
    }
}

impl From<Vec<String>> for Value {
    fn from(items: Vec<String>) -> Self {
        Value::List(items)
    }
}

impl From<Vec<&str>> for Value {
    fn from(items: Vec<&str>) -> Self {
        Value::List(items.into_iter().map(str::to_owned).collect())
    }
}

/// The runtime value map shared by every step of one run: name → [`Value`].
///
/// Runtime values are data, never template text: a value such as `{file}` or `; rm -rf /` is
/// substituted literally and never re-examined for placeholders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values {
    map: BTreeMap<String, Value>,
}

impl Values {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name`, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        self.map.insert(name.into(), value.into())
    }

    /// Builder form of [`Values::insert`].
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.insert(name, value);
        self
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name)
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no value is set.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The values in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Values {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut values = Values::new();
        values.extend(iter);
        values
    }
}

impl<K: Into<String>, V: Into<Value>> Extend<(K, V)> for Values {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}
