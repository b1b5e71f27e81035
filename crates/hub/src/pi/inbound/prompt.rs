//! What pi reads about a turn besides the person's words: the files that came with it, what
//! inbound handlers made of them, the message it replies to, and what was forwarded. Tagged
//! blocks (`[attachments]`, `[outputs]`, `[reply|from:…]`, `[forward|from:…]`) so a model and a
//! skill can tell them apart.

use std::path::Path;

use store::files::{File, FileState};

/// How much of a replied-to or forwarded text pi gets.
const QUOTE_CHARS: usize = 3000;

/// A byte count for people: `950 B`, `12.3 KB`, `4.0 MB`.
pub fn human_size(bytes: i64) -> String {
    let b = bytes.max(0) as f64;
    if b < 1000.0 {
        format!("{bytes} B")
    } else if b < 1_000_000.0 {
        format!("{:.1} KB", b / 1000.0)
    } else if b < 1_000_000_000.0 {
        format!("{:.1} MB", b / 1_000_000.0)
    } else {
        format!("{:.1} GB", b / 1_000_000_000.0)
    }
}

fn clip(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() <= QUOTE_CHARS {
        return t.to_owned();
    }
    let cut: String = t.chars().take(QUOTE_CHARS).collect();
    format!("{cut}… (cut)")
}

/// The block about the message the person replied to.
pub fn reply_block(from: &str, text: &str) -> String {
    format!("[reply|from:{from}]\n{}", clip(text))
}

/// The block about a forwarded message (its own text or caption; may be empty when only
/// files were forwarded).
pub fn forward_block(from: &str, text: &str) -> String {
    let t = clip(text);
    if t.is_empty() {
        format!("[forward|from:{from}]")
    } else {
        format!("[forward|from:{from}]\n{t}")
    }
}

/// The `[attachments]` block (with `[outputs]` when handlers produced any) for `files`, saved
/// under `dir`. `None` without files.
pub fn attachments_block(dir: &Path, files: &[File]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut out = format!("[attachments] {}", dir.display());
    for f in files {
        let name = f
            .path
            .as_deref()
            .and_then(|p| Path::new(p).file_name())
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .or_else(|| f.name.clone())
            .unwrap_or_else(|| f.kind.clone());
        let mut facts = vec![f.kind.clone()];
        if let Some(m) = &f.mime {
            facts.push(m.clone());
        }
        if let Some(s) = f.size {
            facts.push(human_size(s));
        }
        if f.origin == store::files::Origin::Forward {
            facts.push("forwarded".into());
        }
        let state = match f.state {
            FileState::Saved if f.kind == "photo" => ", also attached as an image".to_owned(),
            FileState::Saved => String::new(),
            FileState::Refused | FileState::Failed => format!(
                ": not downloaded ({})",
                f.error.as_deref().unwrap_or("unknown reason")
            ),
            FileState::Pending => ": not downloaded".to_owned(),
        };
        let original = match (&f.name, f.state) {
            (Some(n), FileState::Saved) if !name.ends_with(n.as_str()) => {
                format!(", sent as \"{}\"", n.replace(['\n', '\r'], " "))
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "\n- {name} ({}{original}){state}",
            facts.join(", ")
        ));
    }
    let outputs: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let o = f.output.as_deref()?.trim();
            let name = f.path.as_deref().and_then(|p| Path::new(p).file_name())?;
            (!o.is_empty()).then(|| format!("- {}:\n{}", name.to_string_lossy(), clip(o)))
        })
        .collect();
    if !outputs.is_empty() {
        out.push_str("\n[outputs]\n");
        out.push_str(&outputs.join("\n"));
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use store::files::Origin;

    fn file(kind: &str, name: Option<&str>, state: FileState, path: Option<&str>) -> File {
        File {
            id: 1,
            turn_id: 1,
            source_update_id: None,
            seq: 0,
            origin: Origin::Message,
            kind: kind.into(),
            file_id: "f".into(),
            file_unique_id: None,
            name: name.map(str::to_owned),
            mime: Some("application/pdf".into()),
            size: Some(1_234_567),
            state,
            path: path.map(str::to_owned),
            error: None,
            output: None,
            attempts: 0,
            not_before_ms: 0,
        }
    }

    #[test]
    fn attachments_name_the_saved_files_and_why_others_are_missing() {
        let dir = Path::new("/a/tmp/telegram/default");
        let saved = file(
            "document",
            Some("report.pdf"),
            FileState::Saved,
            Some("/a/tmp/telegram/default/7-0-report.pdf"),
        );
        let mut refused = file("document", Some("huge.iso"), FileState::Refused, None);
        refused.error = Some("62.0 MB is over the 50 MiB limit".into());
        let block = attachments_block(dir, &[saved, refused]).unwrap();
        assert_eq!(
            block,
            "[attachments] /a/tmp/telegram/default\n\
             - 7-0-report.pdf (document, application/pdf, 1.2 MB)\n\
             - huge.iso (document, application/pdf, 1.2 MB): not downloaded (62.0 MB is over the 50 MiB limit)"
        );
        assert_eq!(attachments_block(dir, &[]), None);
    }

    #[test]
    fn outputs_follow_and_quotes_are_clipped() {
        let mut voice = file("voice", None, FileState::Saved, Some("/d/3-0-voice.ogg"));
        voice.mime = Some("audio/ogg".into());
        voice.output = Some("hello there\n".into());
        let block = attachments_block(Path::new("/d"), &[voice]).unwrap();
        assert!(
            block.ends_with("[outputs]\n- 3-0-voice.ogg:\nhello there"),
            "{block}"
        );
        let long = "x".repeat(QUOTE_CHARS + 10);
        assert!(reply_block("pi", &long).ends_with("… (cut)"));
        assert_eq!(forward_block("Ada", ""), "[forward|from:Ada]");
        assert_eq!(human_size(950), "950 B");
        assert_eq!(human_size(12_300), "12.3 KB");
    }
}
