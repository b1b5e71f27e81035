//! Warnings for the obvious high-risk shapes: shells, interpreter eval modes, destructive file
//! commands over placeholder-derived or broad paths, and shell syntax that will not work.
//!
//! These inform a reviewer; they never block a template. Templates are trusted code either way.

use crate::model::{Body, Node};
use crate::placeholder::Word;

const WRAPPERS: &[&str] = &["sudo", "doas", "env", "nice", "nohup", "time", "exec"];
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "ash", "csh", "tcsh",
];
const DESTRUCTIVE: &[&str] = &["rm", "mv", "cp", "rsync"];
const BROAD: &[&str] = &["/", "/*", "~", "~/", "~/*", "*", ".", "..", "./*", "$HOME"];
const SHELL_SYNTAX: &[&str] = &[
    "|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>",
];

/// All warnings for the tree, each prefixed with the node location.
pub(crate) fn risky(root: &Node) -> Vec<String> {
    let mut out = Vec::new();
    root.walk(&mut |node| {
        if let Body::Command { words } = &node.body {
            check(&node.at, words, &mut out);
        }
    });
    out
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

fn check(at: &str, words: &[Word], out: &mut Vec<String>) {
    let Some(first) = words.first() else {
        return;
    };
    if first.has_placeholder() {
        out.push(format!(
            "{at}: the executable comes from a placeholder (`{}`): whoever sets that value \
             chooses what runs",
            first.display()
        ));
    }
    for w in words.iter().filter(|w| w.plain) {
        if let Some(lit) = w.literal() {
            if SHELL_SYNTAX.contains(&lit.as_str()) {
                out.push(format!(
                    "{at}: `{lit}` is passed as a literal argument: templates run without a shell"
                ));
            } else if lit.starts_with('$') && lit.len() > 1 {
                out.push(format!(
                    "{at}: `{lit}` is not expanded: templates run without a shell"
                ));
            }
        }
    }

    // Look through wrappers such as `sudo` or `env VAR=1` to the command they run.
    let mut i = 0;
    let mut wrapped = false;
    while let Some(lit) = words.get(i).and_then(Word::literal) {
        let wrapper = WRAPPERS.contains(&basename(&lit));
        let wrapper_arg = wrapped && (lit.starts_with('-') || lit.contains('='));
        if !(wrapper || wrapper_arg) {
            break;
        }
        wrapped |= wrapper;
        i += 1;
    }
    let Some(cmd) = words.get(i).and_then(Word::literal) else {
        return;
    };
    let cmd = basename(&cmd).to_owned();
    let args = &words[i + 1..];
    let lits: Vec<String> = args.iter().filter_map(Word::literal).collect();
    let has = |flags: &[&str]| lits.iter().any(|a| flags.contains(&a.as_str()));

    if SHELLS.contains(&cmd.as_str()) {
        let dash_c = lits
            .iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'));
        if dash_c {
            let code_from_values = args.iter().any(Word::has_placeholder);
            out.push(format!(
                "{at}: `{cmd} -c` runs shell code{}",
                if code_from_values {
                    "; placeholder values in its arguments can become code"
                } else {
                    ""
                }
            ));
        } else {
            out.push(format!(
                "{at}: runs a shell (`{cmd}`): its script is trusted code"
            ));
        }
    }

    let eval_flags: Option<&[&str]> = match cmd.as_str() {
        "node" | "nodejs" | "deno" | "bun" => Some(&["-e", "--eval", "-p", "--print"]),
        c if c.starts_with("python") || c.starts_with("pypy") => Some(&["-c"]),
        "ruby" | "perl" | "lua" | "osascript" => Some(&["-e", "-E"]),
        "php" => Some(&["-r"]),
        "pwsh" | "powershell" => Some(&["-c", "-Command", "-command"]),
        _ => None,
    };
    if let Some(flags) = eval_flags
        && has(flags)
    {
        out.push(format!(
            "{at}: `{cmd}` evaluates code given on the command line"
        ));
    }

    if DESTRUCTIVE.contains(&cmd.as_str()) {
        if let Some(w) = args.iter().find(|w| w.has_placeholder()) {
            out.push(format!(
                "{at}: `{cmd}` over a placeholder-derived path (`{}`)",
                w.display()
            ));
        }
        if let Some(broad) = lits.iter().find(|a| BROAD.contains(&a.as_str())) {
            out.push(format!("{at}: `{cmd}` over a broad path (`{broad}`)"));
        }
    }
}
