//! JSON → template tree, with every key checked.

use serde_json::Value as Json;

use crate::error::TemplateError;
use crate::model::{ArgDecl, Body, Failure, Node, Num, Output, When};
use crate::placeholder::{Word, is_name, type_len};
use crate::resolve::Defaults;
use crate::split::{SplitError, split};
use crate::values::Value;

/// Keys an object node may have, in the standard's order.
const KNOWN_KEYS: &[&str] = &[
    "label", "parallel", "repeat", "when", "args", "defaults", "timeout", "delay", "output",
    "retry", "failure", "recover", "template",
];

/// Where a node sits, which decides what it may contain.
#[derive(Clone, Copy)]
pub(crate) struct Place<'k> {
    /// The top of the template: the only node that may select a file `output`, and the only
    /// one where the host's own keys are skipped.
    pub(crate) root: bool,
    /// Keys the host owns at the top level (`type`, `mime`, `match`...), skipped unchecked.
    pub(crate) host_keys: &'k [&'k str],
    /// The failure scope inherited from the parent.
    pub(crate) inherited: Failure,
}

/// Parses one node (string, array or object) at location `at`.
pub(crate) fn parse_node(v: &Json, at: String, place: Place<'_>) -> Result<Node, TemplateError> {
    match v {
        Json::String(s) => Ok(bare(at.clone(), place.inherited, command(s, &at)?)),
        Json::Array(items) => {
            let body = sequence(items, &at, place.inherited)?;
            Ok(bare(at, place.inherited, body))
        }
        Json::Object(map) => object(map, at, place),
        other => Err(wrong(
            &at,
            "template",
            "a string, an array or an object",
            other,
        )),
    }
}

fn bare(at: String, failure: Failure, body: Body) -> Node {
    Node {
        at,
        label: None,
        when: None,
        args: None,
        defaults: None,
        timeout: None,
        delay: None,
        retry: None,
        output: Output::Stdout,
        failure,
        recover: None,
        body,
    }
}

fn object(
    map: &serde_json::Map<String, Json>,
    at: String,
    place: Place<'_>,
) -> Result<Node, TemplateError> {
    for key in map.keys() {
        let host = place.root && place.host_keys.contains(&key.as_str());
        if !host && !KNOWN_KEYS.contains(&key.as_str()) {
            return Err(TemplateError::UnknownKey {
                at: at.clone(),
                key: key.clone(),
            });
        }
    }
    if let Some(p) = map.get("parallel") {
        match p {
            Json::Bool(false) => {}
            Json::Bool(true) => {
                return Err(TemplateError::Unsupported {
                    at,
                    key: "parallel".into(),
                    why: "concurrent branches are not implemented; drop `parallel` to run the \
                          steps in order",
                });
            }
            other => return Err(wrong(&at, "parallel", "a boolean", other)),
        }
    }
    if map.contains_key("repeat") {
        return Err(TemplateError::Unsupported {
            at,
            key: "repeat".into(),
            why: "node expansion and repeat placeholders ({index}, {_(index+1)}...) are not \
                  implemented; write the steps out",
        });
    }
    let label = match map.get("label") {
        None => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(other) => return Err(wrong(&at, "label", "a string", other)),
    };
    let when = map.get("when").map(|v| when(v, &at)).transpose()?;
    let args = map.get("args").map(|v| args(v, &at)).transpose()?;
    let defaults = map.get("defaults").map(|v| defaults(v, &at)).transpose()?;
    let timeout = map
        .get("timeout")
        .map(|v| num(v, &at, "timeout"))
        .transpose()?;
    let delay = map.get("delay").map(|v| num(v, &at, "delay")).transpose()?;
    let retry = map.get("retry").map(|v| num(v, &at, "retry")).transpose()?;
    let output = match map.get("output") {
        None => Output::Stdout,
        Some(v) => output(v, &at, place.root)?,
    };
    let failure = match map.get("failure") {
        None => place.inherited,
        Some(Json::String(s)) => match s.as_str() {
            "continue" => Failure::Continue,
            "branch" => Failure::Branch,
            "root" => Failure::Root,
            _ => {
                return Err(TemplateError::InvalidField {
                    at,
                    key: "failure".into(),
                    why: format!("`{s}` is not one of continue, branch, root"),
                });
            }
        },
        Some(other) => return Err(wrong(&at, "failure", "a string", other)),
    };
    // Recovery is fail-closed: its steps stop at the first failure unless they say otherwise.
    let recover = match map.get("recover") {
        None => None,
        Some(v) => {
            let place = Place {
                root: false,
                host_keys: &[],
                inherited: Failure::Branch,
            };
            Some(Box::new(parse_node(v, format!("{at}.recover"), place)?))
        }
    };
    let body = match map.get("template") {
        None => return Err(TemplateError::MissingTemplate { at }),
        Some(Json::String(s)) => command(s, &at)?,
        Some(Json::Array(items)) => sequence(items, &at, failure)?,
        Some(other) => return Err(wrong(&at, "template", "a string or an array", other)),
    };
    Ok(Node {
        at,
        label,
        when,
        args,
        defaults,
        timeout,
        delay,
        retry,
        output,
        failure,
        recover,
        body,
    })
}

fn command(s: &str, at: &str) -> Result<Body, TemplateError> {
    let raw = split(s).map_err(|e| match e {
        SplitError::UnterminatedQuote(quote) => TemplateError::UnterminatedQuote {
            at: at.to_owned(),
            quote,
            template: s.to_owned(),
        },
        SplitError::TrailingBackslash => TemplateError::TrailingBackslash {
            at: at.to_owned(),
            template: s.to_owned(),
        },
    })?;
    if raw.is_empty() {
        return Err(TemplateError::EmptyCommand { at: at.to_owned() });
    }
    Ok(Body::Command {
        words: raw.iter().map(Word::from_raw).collect(),
    })
}

fn sequence(items: &[Json], at: &str, failure: Failure) -> Result<Body, TemplateError> {
    if items.is_empty() {
        return Err(TemplateError::EmptyComposition { at: at.to_owned() });
    }
    let place = Place {
        root: false,
        host_keys: &[],
        inherited: failure,
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| parse_node(v, format!("{at}[{i}]"), place))
        .collect::<Result<Vec<_>, _>>()
        .map(Body::Sequence)
}

fn when(v: &Json, at: &str) -> Result<When, TemplateError> {
    match v {
        Json::Bool(b) => Ok(When::Const(*b)),
        Json::String(s) => {
            let s = s.trim();
            if s.contains('{') {
                return Ok(When::Expr(Word::from_plain(s)));
            }
            match s {
                "true" => return Ok(When::Const(true)),
                "false" => return Ok(When::Const(false)),
                _ => {}
            }
            let (negate, name) = match s.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, s),
            };
            if is_name(name) {
                Ok(When::Flag {
                    name: name.to_owned(),
                    negate,
                })
            } else {
                Err(TemplateError::InvalidField {
                    at: at.to_owned(),
                    key: "when".into(),
                    why: format!("`{s}` is not a flag name, `!flag`, or a placeholder expression"),
                })
            }
        }
        other => Err(wrong(at, "when", "a boolean or a string", other)),
    }
}

fn args(v: &Json, at: &str) -> Result<Vec<ArgDecl>, TemplateError> {
    let Json::Array(items) = v else {
        return Err(wrong(at, "args", "an array of strings", v));
    };
    items
        .iter()
        .map(|item| {
            let Json::String(s) = item else {
                return Err(wrong(at, "args", "an array of strings", item));
            };
            let invalid = |why: String| TemplateError::InvalidField {
                at: at.to_owned(),
                key: "args".into(),
                why,
            };
            if s.contains('=') {
                return Err(invalid(format!(
                    "`{s}`: put default values in `defaults` or inline (`{{name=value}}`)"
                )));
            }
            let (name, kind) = match s.split_once(':') {
                Some((name, kind)) => (name, Some(kind)),
                None => (s.as_str(), None),
            };
            let kind_ok = kind.is_none_or(|k| type_len(k) == Some(k.len()));
            if !is_name(name) || !kind_ok {
                return Err(invalid(format!(
                    "`{s}` is not `name` or `name:type` (e.g. `file:path`, `mode:enum(a,b)`)"
                )));
            }
            Ok(ArgDecl {
                name: name.to_owned(),
                kind: kind.map(str::to_owned),
            })
        })
        .collect()
}

fn defaults(v: &Json, at: &str) -> Result<Defaults, TemplateError> {
    let Json::Object(map) = v else {
        return Err(wrong(at, "defaults", "an object", v));
    };
    let scalar = |v: &Json| match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let mut out = Defaults::new();
    for (name, v) in map {
        let value = match v {
            Json::Array(items) => items
                .iter()
                .map(scalar)
                .collect::<Option<Vec<_>>>()
                .map(Value::List),
            other => scalar(other).map(Value::Text),
        };
        let Some(value) = value else {
            return Err(TemplateError::InvalidField {
                at: at.to_owned(),
                key: "defaults".into(),
                why: format!(
                    "`{name}` must be a string, number, boolean or an array of those, found {}",
                    kind(v)
                ),
            });
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

fn num(v: &Json, at: &str, key: &str) -> Result<Num, TemplateError> {
    let invalid = |why: String| TemplateError::InvalidField {
        at: at.to_owned(),
        key: key.to_owned(),
        why,
    };
    match v {
        Json::Number(n) => {
            if let Some(u) = n.as_u64() {
                return Ok(Num::Fixed(u));
            }
            match n.as_f64() {
                Some(f) if f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64 => {
                    Ok(Num::Fixed(f as u64))
                }
                _ => Err(invalid(format!("{n} is not a non-negative integer"))),
            }
        }
        Json::String(s) if s.contains('{') => Ok(Num::Expr(Word::from_plain(s.trim()))),
        Json::String(s) => s.trim().parse().map(Num::Fixed).map_err(|_| {
            invalid(format!(
                "`{s}` is not a non-negative integer or a placeholder"
            ))
        }),
        other => Err(wrong(at, key, "a number or a placeholder string", other)),
    }
}

fn output(v: &Json, at: &str, root: bool) -> Result<Output, TemplateError> {
    let Json::String(s) = v else {
        return Err(wrong(at, "output", "a string", v));
    };
    let s = s.trim();
    if s == "stdout" {
        return Ok(Output::Stdout);
    }
    if !root {
        return Err(TemplateError::Unsupported {
            at: at.to_owned(),
            key: "output".into(),
            why: "only the top-level node may select a file result; inner steps always pass \
                  stdout on",
        });
    }
    let word = if s.contains('{') {
        Word::from_plain(s)
    } else if is_name(s) {
        Word::placeholder(s)
    } else {
        return Err(TemplateError::InvalidField {
            at: at.to_owned(),
            key: "output".into(),
            why: format!("`{s}` is not `stdout`, a value name, or a placeholder such as `{{ogg}}`"),
        });
    };
    if !word.has_placeholder() {
        return Err(TemplateError::InvalidField {
            at: at.to_owned(),
            key: "output".into(),
            why: format!("`{s}` has no valid placeholder"),
        });
    }
    Ok(Output::File {
        word,
        source: s.to_owned(),
    })
}

fn wrong(at: &str, key: &str, expected: &'static str, found: &Json) -> TemplateError {
    TemplateError::WrongType {
        at: at.to_owned(),
        key: key.to_owned(),
        expected,
        found: kind(found),
    }
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}
