//! Resolving placeholders against runtime values and `defaults`.
//!
//! Resolution of a name: runtime value → nearest `defaults` layer → the inline default → error.
//! A default (from `defaults`, `=default`, `??fallback` or a `?yes:no` branch) that is exactly
//! one placeholder is resolved in turn, up to [`MAX_DEFAULT_DEPTH`] levels; any other default is
//! literal text. Runtime values are never re-examined.

use std::collections::BTreeMap;

use crate::error::{MAX_DEFAULT_DEPTH, TemplateError};
use crate::placeholder::{Expr, Index, Op, Piece, Word, whole_placeholder};
use crate::values::{Value, Values, text_is_truthy};

/// A node's own `defaults`.
pub(crate) type Defaults = BTreeMap<String, Value>;

/// What a name resolved to, before the placeholder's operator is applied.
enum Fetched {
    Absent,
    Text(String),
    List(usize),
}

/// The runtime values plus the `defaults` layers that apply to one node, outermost first.
#[derive(Clone, Debug)]
pub(crate) struct Scope<'a> {
    values: &'a Values,
    layers: Vec<&'a Defaults>,
}

impl<'a> Scope<'a> {
    /// Runtime values only.
    pub(crate) fn new(values: &'a Values) -> Self {
        Self {
            values,
            layers: Vec::new(),
        }
    }

    /// This scope with a node's own `defaults` merged over it.
    pub(crate) fn with(&self, defaults: Option<&'a Defaults>) -> Self {
        let mut next = self.clone();
        if let Some(d) = defaults {
            next.layers.push(d);
        }
        next
    }

    fn lookup(&self, name: &str) -> Option<(&'a Value, bool)> {
        if let Some(v) = self.values.get(name) {
            return Some((v, false));
        }
        self.layers
            .iter()
            .rev()
            .find_map(|layer| layer.get(name))
            .map(|v| (v, true))
    }

    fn fetch(&self, e: &Expr, at: &str, depth: usize) -> Result<Fetched, TemplateError> {
        let Some((value, from_default)) = self.lookup(&e.name) else {
            return Ok(Fetched::Absent);
        };
        let text = match (&e.index, value) {
            (None, Value::Text(s)) => s,
            (None, Value::List(items)) => return Ok(Fetched::List(items.len())),
            (Some(_), Value::Text(_)) => {
                return Err(TemplateError::NotAList {
                    at: at.to_owned(),
                    name: e.name.clone(),
                });
            }
            (Some(ix), Value::List(items)) => {
                let i = self.index(&e.name, ix, at, depth)?;
                match items.get(i) {
                    Some(s) => s,
                    None => return Ok(Fetched::Absent),
                }
            }
        };
        if from_default {
            Ok(Fetched::Text(self.resolve_text(text, &e.name, at, depth)?))
        } else {
            Ok(Fetched::Text(text.clone()))
        }
    }

    fn index(
        &self,
        name: &str,
        ix: &Index,
        at: &str,
        depth: usize,
    ) -> Result<usize, TemplateError> {
        match ix {
            Index::Literal(i) => Ok(*i),
            Index::Var(var) => {
                let text = self.resolve_expr(&Expr::required(var), at, depth + 1)?;
                text.trim().parse().map_err(|_| TemplateError::BadIndex {
                    at: at.to_owned(),
                    name: name.to_owned(),
                    index: text,
                })
            }
        }
    }

    /// A default's text: resolved further when it is exactly one placeholder, else literal.
    fn resolve_text(
        &self,
        text: &str,
        name: &str,
        at: &str,
        depth: usize,
    ) -> Result<String, TemplateError> {
        match whole_placeholder(text) {
            Some(inner) => {
                if depth >= MAX_DEFAULT_DEPTH {
                    return Err(TemplateError::TooDeep {
                        at: at.to_owned(),
                        name: name.to_owned(),
                    });
                }
                self.resolve_expr(&inner, at, depth + 1)
            }
            None => Ok(text.to_owned()),
        }
    }

    /// The text a placeholder stands for.
    pub(crate) fn resolve_expr(
        &self,
        e: &Expr,
        at: &str,
        depth: usize,
    ) -> Result<String, TemplateError> {
        if depth > MAX_DEFAULT_DEPTH {
            return Err(TemplateError::TooDeep {
                at: at.to_owned(),
                name: e.name.clone(),
            });
        }
        let list_err = || TemplateError::ListValue {
            at: at.to_owned(),
            name: e.name.clone(),
        };
        let fetched = self.fetch(e, at, depth)?;
        match &e.op {
            Op::Required => match fetched {
                Fetched::Text(s) => Ok(s),
                Fetched::List(_) => Err(list_err()),
                Fetched::Absent => Err(TemplateError::Missing {
                    at: at.to_owned(),
                    name: e.name.clone(),
                }),
            },
            Op::Default(d) => match fetched {
                Fetched::Text(s) => Ok(s),
                Fetched::List(_) => Err(list_err()),
                Fetched::Absent => self.resolve_text(d, &e.name, at, depth),
            },
            Op::Fallback(f) => match fetched {
                Fetched::Text(s) if text_is_truthy(&s) => Ok(s),
                Fetched::List(n) if n > 0 => Err(list_err()),
                _ => self.resolve_text(f, &e.name, at, depth),
            },
            Op::Cond { yes, no } => {
                let truthy = match fetched {
                    Fetched::Text(s) => text_is_truthy(&s),
                    Fetched::List(n) => n > 0,
                    Fetched::Absent => false,
                };
                self.resolve_text(if truthy { yes } else { no }, &e.name, at, depth)
            }
        }
    }

    /// Whether a name's value is truthy; absent is false.
    pub(crate) fn flag(&self, name: &str, at: &str) -> Result<bool, TemplateError> {
        Ok(match self.fetch(&Expr::required(name), at, 0)? {
            Fetched::Absent => false,
            Fetched::Text(s) => text_is_truthy(&s),
            Fetched::List(n) => n > 0,
        })
    }

    /// The word with its placeholders substituted; `None` for a vanishing word that came out
    /// empty.
    pub(crate) fn resolve_word(&self, w: &Word, at: &str) -> Result<Option<String>, TemplateError> {
        let mut out = String::new();
        for p in &w.pieces {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Ph(e) => out.push_str(&self.resolve_expr(e, at, 0)?),
            }
        }
        if w.vanishing && out.is_empty() {
            Ok(None)
        } else {
            Ok(Some(out))
        }
    }

    /// The word's text, keeping an empty result (for single-value fields).
    pub(crate) fn resolve_value(&self, w: &Word, at: &str) -> Result<String, TemplateError> {
        Ok(self.resolve_word(w, at)?.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::split;

    fn word(s: &str) -> Word {
        let raw = split(s).expect("split");
        assert_eq!(raw.len(), 1, "{s:?} is one word");
        Word::from_raw(&raw[0])
    }

    fn resolve(
        template: &str,
        values: &Values,
        defaults: &Defaults,
    ) -> Result<String, TemplateError> {
        let scope = Scope::new(values).with(Some(defaults));
        scope.resolve_value(&word(template), "root")
    }

    #[test]
    fn resolution_order_and_forms() {
        let values = Values::new()
            .with("text", "hello world")
            .with("empty", "")
            .with("on", "yes")
            .with("off", "false")
            .with("items", vec!["a", "b"])
            .with("i", "1");
        let mut defaults = Defaults::new();
        defaults.insert("lang".into(), Value::Text("en".into()));
        defaults.insert("text".into(), Value::Text("shadowed".into()));
        defaults.insert("alias".into(), Value::Text("{items[i]}".into()));
        defaults.insert("loop".into(), Value::Text("{loop}".into()));
        let r = |t: &str| resolve(t, &values, &defaults);
        assert_eq!(r("{text}").as_deref(), Ok("hello world"));
        assert_eq!(r("{lang}").as_deref(), Ok("en"));
        assert_eq!(r("{lang=ru}").as_deref(), Ok("en"));
        assert_eq!(r("{rate=+30%}").as_deref(), Ok("+30%"));
        assert_eq!(r("{empty=x}").as_deref(), Ok(""));
        assert_eq!(r("{empty??fb}").as_deref(), Ok("fb"));
        assert_eq!(r("{off??fb}").as_deref(), Ok("fb"));
        assert_eq!(r("{absent??fb}").as_deref(), Ok("fb"));
        assert_eq!(r("{text??fb}").as_deref(), Ok("hello world"));
        assert_eq!(r("{on?Y:N}").as_deref(), Ok("Y"));
        assert_eq!(r("{off?Y:N}").as_deref(), Ok("N"));
        assert_eq!(r("{absent?Y:N}").as_deref(), Ok("N"));
        assert_eq!(r("{items[0]}").as_deref(), Ok("a"));
        assert_eq!(r("{items[i]}").as_deref(), Ok("b"));
        assert_eq!(r("{items[5]=z}").as_deref(), Ok("z"));
        assert_eq!(r("{alias}").as_deref(), Ok("b"));
        assert_eq!(r("{absent={lang}}").as_deref(), Ok("en"));
        assert_eq!(r("pre-{lang}-{text}").as_deref(), Ok("pre-en-hello world"));
        assert!(matches!(r("{nope}"), Err(TemplateError::Missing { name, .. }) if name == "nope"));
        assert!(matches!(r("{items}"), Err(TemplateError::ListValue { .. })));
        assert!(matches!(
            r("{text[0]}"),
            Err(TemplateError::NotAList { .. })
        ));
        assert!(matches!(
            r("{items[text]}"),
            Err(TemplateError::BadIndex { .. })
        ));
        assert!(matches!(r("{loop}"), Err(TemplateError::TooDeep { .. })));
    }

    #[test]
    fn runtime_values_are_not_reexamined() {
        let values = Values::new().with("text", "{secret}").with("secret", "x");
        let out = resolve("{text}", &values, &Defaults::new());
        assert_eq!(out.as_deref(), Ok("{secret}"));
    }
}
