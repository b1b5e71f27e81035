//! The models pi has enabled, for a headless pi: pi's RPC lists every available model
//! (`get_available_models`) and has no command for the scoped ones, so the hub reads pi's
//! `enabledModels` setting as pi does and matches its patterns against that list as pi does
//! (pi 1.6.0, `core/model-resolver.js` and `core/settings-manager.js`). A pi with the
//! extension reports its own scope (`ctx.scopedModels`).
//!
//! Where the setting comes from: `<agent-dir>/settings.json`, and the project's
//! `<cwd>/.pi/settings.json` over it (a project value replaces the agent-dir one) when pi
//! trusts the project: the nearest decision in `<agent-dir>/trust.json` for the folder or a
//! parent, else `defaultProjectTrust: "always"` in the agent-dir settings (a headless pi asks
//! nobody). Not seen from here: a `--models` flag (the hub never passes one) and an extension
//! of the person's that decides `project_trust` itself.
//!
//! The patterns, each as pi reads it: one with `*`, `?` or `[` is a glob (an exact model
//! reference first, then matched without case against `provider/id` and `id`; `*` and `?`
//! stop at `/`, `**` spans them, `[...]` classes, `{a,b}` alternatives: minimatch's
//! extglobs are not read); any other is a model reference (`provider/id` or `id`, without
//! case), else the models whose id or name contains it (aliases before dated ids, then the
//! greatest id). A `:level` thinking suffix is dropped (pi pins the level for its own
//! cycling). A pattern that matches several providers' models takes them all, as pi does.
//! No pattern matching anything means no scope: every available model.
//!
//! Reading blocks on the disk: run [`enabled_patterns`] off the runtime.

use std::path::Path;

use serde_json::{Map, Value};

/// pi's thinking levels (a pattern's `:level` suffix).
const LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// How much of one of pi's settings files is read.
const SETTINGS_BYTES: u64 = 1024 * 1024;

/// One available model, as the scope is matched against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub provider: String,
    pub id: String,
    pub name: String,
}

/// The `enabledModels` patterns in force for a pi started in `cwd` (`None`: not set).
pub fn enabled_patterns(agent_dir: &Path, cwd: &Path) -> Option<Vec<String>> {
    let global = settings(&agent_dir.join("settings.json"));
    let project_file = cwd.join(".pi").join("settings.json");
    let project = if project_file.exists() && trusted(agent_dir, cwd, &global) {
        settings(&project_file)
    } else {
        Map::new()
    };
    // pi's merge: a project key replaces the agent-dir one (arrays are not combined).
    let value = project
        .get("enabledModels")
        .or(global.get("enabledModels"))?;
    let list = value.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// One of pi's settings files; a missing or unreadable one counts as empty, as pi takes it.
fn settings(path: &Path) -> Map<String, Value> {
    let Ok(bytes) = crate::regular::read_up_to(path, SETTINGS_BYTES) else {
        return Map::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Whether a headless pi loads `cwd`'s project settings.
fn trusted(agent_dir: &Path, cwd: &Path, global: &Map<String, Value>) -> bool {
    let saved = settings(&agent_dir.join("trust.json"));
    let canonical = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
    for dir in canonical.ancestors() {
        if let Some(decision) = saved
            .get(dir.to_string_lossy().as_ref())
            .and_then(Value::as_bool)
        {
            return decision;
        }
    }
    global.get("defaultProjectTrust").and_then(Value::as_str) == Some("always")
}

/// The models `patterns` enable, as indices into `models`, in pi's order (pattern by
/// pattern, each once). Empty when nothing matches: then every model is usable.
pub fn resolve(patterns: &[String], models: &[Model]) -> Vec<usize> {
    let mut scoped: Vec<usize> = Vec::new();
    for pattern in patterns {
        let found = if pattern.contains(['*', '?', '[']) {
            let glob = without_level(pattern).unwrap_or(pattern);
            match select_reference(glob.trim(), models, false) {
                Found::One(i) => vec![i],
                Found::Many(list) => list,
                Found::None => {
                    let glob = glob.to_lowercase();
                    (0..models.len())
                        .filter(|&i| {
                            let m = &models[i];
                            let full = format!("{}/{}", m.provider, m.id).to_lowercase();
                            globs(&glob, &full) || globs(&glob, &m.id.to_lowercase())
                        })
                        .collect()
                }
            }
        } else {
            match resolve_text(pattern.trim(), models) {
                Found::One(i) => vec![i],
                Found::Many(list) => list,
                Found::None => Vec::new(),
            }
        };
        for i in found {
            if !scoped.contains(&i) {
                scoped.push(i);
            }
        }
    }
    scoped
}

/// What a reference matched.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    None,
    One(usize),
    /// Several providers' models, all taken.
    Many(Vec<usize>),
}

/// `text` without a `:level` thinking suffix, when it has one.
fn without_level(text: &str) -> Option<&str> {
    let (base, suffix) = text.rsplit_once(':')?;
    LEVELS.contains(&suffix).then_some(base)
}

/// A plain pattern: a reference, else a fuzzy match, else the same without a suffix after
/// its last `:` (a thinking level, or one pi warns about and ignores).
fn resolve_text(text: &str, models: &[Model]) -> Found {
    let found = select_reference(text, models, true);
    if found != Found::None {
        return found;
    }
    let found = select_fuzzy(&fuzzy_matches(text, models, None), models);
    if found != Found::None {
        return found;
    }
    match text.rsplit_once(':') {
        Some((base, _)) => resolve_text(base, models),
        None => Found::None,
    }
}

/// `provider/id` (the provider named first), or a bare id; with `fuzzy`, a `provider/part`
/// also matches that provider's models fuzzily.
fn select_reference(text: &str, models: &[Model], fuzzy: bool) -> Found {
    let lower = text.to_lowercase();
    let raw: Vec<usize> = (0..models.len())
        .filter(|&i| models[i].id.to_lowercase() == lower)
        .collect();
    let named = split_provider(text, models).and_then(|(provider, rest)| {
        let rest_lower = rest.to_lowercase();
        let of_provider: Vec<usize> = (0..models.len())
            .filter(|&i| models[i].provider == provider)
            .collect();
        of_provider
            .iter()
            .copied()
            .find(|&i| models[i].id.to_lowercase() == rest_lower)
            .or_else(|| {
                raw.iter()
                    .copied()
                    .find(|&i| models[i].provider == provider)
            })
            .or_else(|| {
                fuzzy
                    .then(|| best_fuzzy(&fuzzy_matches(&rest, models, Some(&of_provider)), models))
                    .flatten()
            })
    });
    let others: Vec<usize> = raw.into_iter().filter(|&i| Some(i) != named).collect();
    let candidates: Vec<usize> = named.into_iter().chain(others.iter().copied()).collect();
    let Some(&first) = candidates.first() else {
        return Found::None;
    };
    let one_provider = candidates
        .iter()
        .all(|&i| models[i].provider == models[first].provider);
    if one_provider {
        return Found::One(first);
    }
    // Every listed model is usable, so the named provider wins, then a sole other match.
    if let Some(n) = named {
        return Found::One(n);
    }
    if let [only] = others.as_slice() {
        return Found::One(*only);
    }
    Found::Many(candidates)
}

/// The longest provider `text` starts with before a `/`, and the rest (trimmed, not empty).
fn split_provider<'m>(text: &str, models: &'m [Model]) -> Option<(&'m str, String)> {
    let mut best: Option<(&'m str, String)> = None;
    for m in models {
        let prefix = m.provider.trim().to_lowercase();
        if prefix.is_empty()
            || best
                .as_ref()
                .is_some_and(|(p, _)| p.len() >= m.provider.len())
        {
            continue;
        }
        // The first `/` at or after the provider's length, as pi looks for it.
        let from = prefix.chars().count();
        let Some((slash, _)) = text.char_indices().skip(from).find(|(_, c)| *c == '/') else {
            continue;
        };
        if text[..slash].trim().to_lowercase() != prefix {
            continue;
        }
        let rest = text[slash + 1..].trim();
        if !rest.is_empty() {
            best = Some((m.provider.as_str(), rest.to_owned()));
        }
    }
    best
}

/// The models (of `among`, else all) whose id or name contains `text`, without case.
fn fuzzy_matches(text: &str, models: &[Model], among: Option<&[usize]>) -> Vec<usize> {
    let lower = text.to_lowercase();
    let all: Vec<usize> = (0..models.len()).collect();
    among
        .unwrap_or(&all)
        .iter()
        .copied()
        .filter(|&i| {
            models[i].id.to_lowercase().contains(&lower)
                || models[i].name.to_lowercase().contains(&lower)
        })
        .collect()
}

/// The best fuzzy match; every provider offering that id when it is offered by several.
fn select_fuzzy(matches: &[usize], models: &[Model]) -> Found {
    let Some(best) = best_fuzzy(matches, models) else {
        return Found::None;
    };
    let tied: Vec<usize> = matches
        .iter()
        .copied()
        .filter(|&i| models[i].id == models[best].id)
        .collect();
    if tied
        .iter()
        .all(|&i| models[i].provider == models[best].provider)
    {
        Found::One(best)
    } else {
        Found::Many(tied)
    }
}

/// Aliases (`x-latest`, or no `-YYYYMMDD` at the end) before dated ids, then the greatest id
/// (pi sorts with `localeCompare`; here without case, then by the id itself).
fn best_fuzzy(matches: &[usize], models: &[Model]) -> Option<usize> {
    let alias = |id: &str| {
        id.ends_with("-latest")
            || !(id.len() > 9
                && id.as_bytes()[id.len() - 9] == b'-'
                && id.as_bytes()[id.len() - 8..].iter().all(u8::is_ascii_digit))
    };
    let aliases: Vec<usize> = matches
        .iter()
        .copied()
        .filter(|&i| alias(&models[i].id))
        .collect();
    let pool = if aliases.is_empty() {
        matches
    } else {
        &aliases
    };
    pool.iter().copied().max_by(|&a, &b| {
        let (a, b) = (&models[a].id, &models[b].id);
        a.to_lowercase()
            .cmp(&b.to_lowercase())
            .then_with(|| a.cmp(b))
            // The first of equals, as a stable sort leaves it.
            .then(std::cmp::Ordering::Greater)
    })
}

/// Whether the (lowercased) glob `pattern` matches `text`, segment by segment.
fn globs(pattern: &str, text: &str) -> bool {
    let texts: Vec<&str> = text.split('/').collect();
    alternatives(pattern).iter().any(|p| {
        let parts: Vec<&str> = p.split('/').collect();
        segments(&parts, &texts)
    })
}

/// `**` spans any number of segments; any other part matches one.
fn segments(parts: &[&str], texts: &[&str]) -> bool {
    match parts.split_first() {
        None => texts.is_empty(),
        Some((&"**", rest)) => (0..=texts.len()).any(|skip| segments(rest, &texts[skip..])),
        Some((part, rest)) => texts.split_first().is_some_and(|(t, more)| {
            segment(part.as_bytes(), t.as_bytes()) && segments(rest, more)
        }),
    }
}

/// One segment: `*` any run, `?` one character, `[...]` a class (`!` or `^` negates, `a-z`
/// ranges), `\` escapes.
fn segment(p: &[u8], t: &[u8]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((b'*', rest)) => (0..=t.len()).any(|skip| segment(rest, &t[skip..])),
        Some((b'?', rest)) => !t.is_empty() && segment(rest, &t[char_len(t)..]),
        Some((b'[', rest)) => match class(rest, t) {
            Some((matched, after)) => matched && segment(after, &t[char_len(t)..]),
            // No closing `]`: a literal `[`.
            None => t.first() == Some(&b'[') && segment(rest, &t[1..]),
        },
        Some((b'\\', rest)) if !rest.is_empty() => {
            t.first() == rest.first() && segment(&rest[1..], &t[1..])
        }
        Some((c, rest)) => t.first() == Some(c) && segment(rest, &t[1..]),
    }
}

/// The byte length of the first character of `t` (at least 1 when `t` is not empty).
fn char_len(t: &[u8]) -> usize {
    match t.first() {
        None => 0,
        Some(b) if *b < 0x80 => 1,
        Some(b) if *b >= 0xf0 => 4.min(t.len()),
        Some(b) if *b >= 0xe0 => 3.min(t.len()),
        Some(_) => 2.min(t.len()),
    }
}

/// A `[...]` class (after its `[`) against the first character of `t`: whether it matched, and
/// the pattern after the `]`. `None` when the class never closes.
fn class<'p>(p: &'p [u8], t: &[u8]) -> Option<(bool, &'p [u8])> {
    let (negated, body) = match p.first() {
        Some(b'!' | b'^') => (true, &p[1..]),
        _ => (false, p),
    };
    // A `]` right at the start is a member, not the end.
    let close = body.iter().skip(1).position(|b| *b == b']')? + 1;
    let members = &body[..close];
    let c = *t.first()?;
    let mut hit = false;
    let mut i = 0;
    while i < members.len() {
        if i + 2 < members.len() && members[i + 1] == b'-' {
            hit |= (members[i]..=members[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= members[i] == c;
            i += 1;
        }
    }
    Some((hit != negated, &body[close + 1..]))
}

/// The patterns `{a,b}` alternatives make (nested ones too); a pattern without them is its
/// own only alternative.
fn alternatives(pattern: &str) -> Vec<String> {
    let bytes = pattern.as_bytes();
    let Some(open) = bytes.iter().position(|b| *b == b'{') else {
        return vec![pattern.to_owned()];
    };
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut close = None;
    for (i, b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            b',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let (Some(close), false) = (close, commas.is_empty()) else {
        // Not an alternative (unclosed, or one choice): literal braces.
        return vec![pattern.to_owned()];
    };
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    let mut bounds = vec![open];
    bounds.extend(&commas);
    bounds.push(close);
    bounds
        .windows(2)
        .flat_map(|w| alternatives(&format!("{head}{}{tail}", &pattern[w[0] + 1..w[1]])))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn models(list: &[(&str, &str, &str)]) -> Vec<Model> {
        list.iter()
            .map(|(p, id, name)| Model {
                provider: (*p).into(),
                id: (*id).into(),
                name: (*name).into(),
            })
            .collect()
    }

    fn catalogue() -> Vec<Model> {
        models(&[
            ("anthropic", "claude-sonnet-4-5", "Claude Sonnet 4.5"),
            (
                "anthropic",
                "claude-sonnet-4-5-20250929",
                "Claude Sonnet 4.5 (dated)",
            ),
            ("anthropic", "claude-opus-4-1", "Claude Opus 4.1"),
            ("openai", "gpt-5", "GPT-5"),
            ("openai", "gpt-5-mini", "GPT-5 mini"),
            ("openrouter", "openai/gpt-5", "GPT-5 via OpenRouter"),
            ("openrouter", "gpt-5", "GPT-5 (router)"),
            ("zai", "glm-4.6", "GLM 4.6"),
        ])
    }

    fn scoped(patterns: &[&str]) -> Vec<String> {
        let all = catalogue();
        let patterns: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
        resolve(&patterns, &all)
            .into_iter()
            .map(|i| format!("{}/{}", all[i].provider, all[i].id))
            .collect()
    }

    #[test]
    fn references_name_a_model_with_or_without_its_provider_and_without_case() {
        assert_eq!(
            scoped(&["anthropic/claude-opus-4-1"]),
            ["anthropic/claude-opus-4-1"]
        );
        assert_eq!(scoped(&["GLM-4.6"]), ["zai/glm-4.6"]);
        // A provider's id that holds a slash is found whole.
        assert_eq!(
            scoped(&["openrouter/openai/gpt-5"]),
            ["openrouter/openai/gpt-5"]
        );
        // The named provider wins over the same id elsewhere.
        assert_eq!(scoped(&["openai/gpt-5"]), ["openai/gpt-5"]);
        // A bare id two providers offer: both, as pi takes an ambiguous pattern.
        assert_eq!(scoped(&["gpt-5"]), ["openai/gpt-5", "openrouter/gpt-5"]);
    }

    #[test]
    fn a_thinking_suffix_is_dropped_and_order_is_the_patterns() {
        assert_eq!(
            scoped(&[
                "zai/glm-4.6:high",
                "anthropic/claude-opus-4-1",
                "zai/glm-4.6"
            ]),
            ["zai/glm-4.6", "anthropic/claude-opus-4-1"]
        );
        assert_eq!(scoped(&["anthropic/*:low"]).len(), 3);
    }

    #[test]
    fn fuzzy_patterns_prefer_aliases_then_the_greatest_id() {
        assert_eq!(scoped(&["sonnet"]), ["anthropic/claude-sonnet-4-5"]);
        assert_eq!(scoped(&["anthropic/opus"]), ["anthropic/claude-opus-4-1"]);
        assert_eq!(scoped(&["mini"]), ["openai/gpt-5-mini"]);
        assert_eq!(scoped(&["nothing-like-it"]), Vec::<String>::new());
    }

    #[test]
    fn globs_match_provider_and_id_or_the_id_alone() {
        // OpenRouter's `openai/gpt-5` matches by its id alone.
        assert_eq!(
            scoped(&["openai/*"]),
            [
                "openai/gpt-5",
                "openai/gpt-5-mini",
                "openrouter/openai/gpt-5"
            ]
        );
        // `*` stops at a slash.
        assert_eq!(scoped(&["openrouter/*"]), ["openrouter/gpt-5"]);
        assert_eq!(
            scoped(&["*sonnet*"]),
            [
                "anthropic/claude-sonnet-4-5",
                "anthropic/claude-sonnet-4-5-20250929"
            ]
        );
        assert_eq!(scoped(&["openrouter/**"]).len(), 2);
        assert_eq!(scoped(&["gpt-5-m?ni"]), ["openai/gpt-5-mini"]);
        assert_eq!(scoped(&["glm-[0-9].6"]), ["zai/glm-4.6"]);
        assert_eq!(scoped(&["glm-[!4].6"]), Vec::<String>::new());
        assert_eq!(
            scoped(&["{zai,anthropic}/*o*"]),
            [
                "anthropic/claude-sonnet-4-5",
                "anthropic/claude-sonnet-4-5-20250929",
                "anthropic/claude-opus-4-1"
            ]
        );
        assert_eq!(
            scoped(&["{zai,openrouter}/g*"]),
            ["openrouter/gpt-5", "zai/glm-4.6"]
        );
        assert_eq!(scoped(&["OPENAI/GPT-5*"]).len(), 3);
    }

    #[test]
    fn the_project_setting_counts_only_in_a_trusted_project() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let project = dir.path().join("work").join("web");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        let write = |path: &Path, v: Value| std::fs::write(path, v.to_string()).unwrap();
        assert_eq!(enabled_patterns(&agent, &project), None);
        write(
            &agent.join("settings.json"),
            serde_json::json!({ "enabledModels": ["openai/*"] }),
        );
        write(
            &project.join(".pi").join("settings.json"),
            serde_json::json!({ "enabledModels": ["zai/*"] }),
        );
        // Untrusted (pi's default "ask" reads as no for a headless pi): the agent-dir list.
        assert_eq!(
            enabled_patterns(&agent, &project),
            Some(vec!["openai/*".to_owned()])
        );
        // Trusted for a parent folder in trust.json: the project's.
        let parent = std::fs::canonicalize(dir.path().join("work")).unwrap();
        write(
            &agent.join("trust.json"),
            serde_json::json!({ parent.to_string_lossy(): true }),
        );
        assert_eq!(
            enabled_patterns(&agent, &project),
            Some(vec!["zai/*".to_owned()])
        );
        // The nearest decision wins.
        let here = std::fs::canonicalize(&project).unwrap();
        write(
            &agent.join("trust.json"),
            serde_json::json!({ parent.to_string_lossy(): true, here.to_string_lossy(): false }),
        );
        assert_eq!(
            enabled_patterns(&agent, &project),
            Some(vec!["openai/*".to_owned()])
        );
        // No decision, `defaultProjectTrust: "always"`: trusted.
        std::fs::remove_file(agent.join("trust.json")).unwrap();
        write(
            &agent.join("settings.json"),
            serde_json::json!({ "enabledModels": ["openai/*"], "defaultProjectTrust": "always" }),
        );
        assert_eq!(
            enabled_patterns(&agent, &project),
            Some(vec!["zai/*".to_owned()])
        );
    }
}
