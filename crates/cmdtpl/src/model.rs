//! The parsed template tree.

use crate::placeholder::Word;
use crate::resolve::Defaults;

/// What happens to the enclosing composition when a node fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Failure {
    /// Record the failure, give the next step empty stdin, go on (the default).
    #[default]
    Continue,
    /// Stop the enclosing composition, which fails in turn.
    Branch,
    /// Abort the whole run (a retrying ancestor still retries first).
    Root,
}

impl Failure {
    /// The standard's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Continue => "continue",
            Failure::Branch => "branch",
            Failure::Root => "root",
        }
    }
}

/// One `args` declaration: `name` or `name:type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgDecl {
    /// The placeholder name.
    pub name: String,
    /// The type annotation as written (`path`, `int`, `enum(check,fix)`), if any. It is kept
    /// for hosts that build tool schemas; execution ignores it.
    pub kind: Option<String>,
}

/// A millisecond / count field: a literal, or a placeholder string resolved at run time.
#[derive(Clone, Debug)]
pub(crate) enum Num {
    Fixed(u64),
    Expr(Word),
}

/// A `when` condition.
#[derive(Clone, Debug)]
pub(crate) enum When {
    Const(bool),
    Flag { name: String, negate: bool },
    Expr(Word),
}

/// The `output` selector.
#[derive(Clone, Debug)]
pub(crate) enum Output {
    Stdout,
    /// A value name or placeholder text resolving to a file path; `source` is as written.
    File {
        word: Word,
        source: String,
    },
}

/// A node's executable content.
#[derive(Clone, Debug)]
pub(crate) enum Body {
    /// One command: its split words (the first is the executable).
    Command { words: Vec<Word> },
    /// Sequential composition.
    Sequence(Vec<Node>),
}

/// One node of the template tree.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Location for messages: `root`, `root[1]`, `root[1].recover`...
    pub(crate) at: String,
    pub(crate) label: Option<String>,
    pub(crate) when: Option<When>,
    pub(crate) args: Option<Vec<ArgDecl>>,
    pub(crate) defaults: Option<Defaults>,
    pub(crate) timeout: Option<Num>,
    pub(crate) delay: Option<Num>,
    pub(crate) retry: Option<Num>,
    pub(crate) output: Output,
    /// Effective failure scope: the node's own `failure`, else its parent's.
    pub(crate) failure: Failure,
    pub(crate) recover: Option<Box<Node>>,
    pub(crate) body: Body,
}

impl Node {
    /// Calls `f` on this node and every node below it, `recover` templates included.
    pub(crate) fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        f(self);
        if let Body::Sequence(children) = &self.body {
            for c in children {
                c.walk(f);
            }
        }
        if let Some(r) = &self.recover {
            r.walk(f);
        }
    }
}
