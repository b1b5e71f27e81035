//! Safe names for downloaded files. A name comes from the sender and may be anything
//! (`../../x`, control characters, a thousand characters, bytes that only look like text): the
//! saved name is a plain file name inside the download folder, never a path.

/// At most this many bytes of the sender's name are kept (the extension included).
const MAX_NAME_BYTES: usize = 96;

/// A file name made from `name` (what the sender called it) for a file of `kind` and `mime`:
/// only ASCII letters, digits, `.`, `-`, `_` and `+`; no leading dot; the extension kept when
/// the name is cut; a name from the kind and MIME type when nothing usable is left.
pub fn safe_name(name: Option<&str>, kind: &str, mime: Option<&str>) -> String {
    // Only the last component of anything path-like.
    let base = name
        .unwrap_or_default()
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    let mut out = String::new();
    for ch in base.chars() {
        let keep = ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_' | '+');
        if keep {
            out.push(ch);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_start_matches(['.', '_']).trim_end_matches('_');
    let mut out = if out.is_empty() || out.chars().all(|c| c == '.') {
        format!("{kind}{}", extension_for(mime).unwrap_or(""))
    } else {
        out.to_owned()
    };
    if out.len() > MAX_NAME_BYTES {
        let ext = out
            .rfind('.')
            .map(|i| out[i..].to_owned())
            .filter(|e| e.len() <= 16)
            .unwrap_or_default();
        let keep = MAX_NAME_BYTES - ext.len();
        out = format!("{}{ext}", &out[..keep]);
    }
    out
}

/// A file extension for a MIME type the hub meets often.
pub fn extension_for(mime: Option<&str>) -> Option<&'static str> {
    Some(match mime? {
        "image/jpeg" => ".jpg",
        "image/png" => ".png",
        "image/webp" => ".webp",
        "image/gif" => ".gif",
        "audio/ogg" => ".ogg",
        "audio/mpeg" => ".mp3",
        "audio/mp4" => ".m4a",
        "video/mp4" => ".mp4",
        "video/webm" => ".webm",
        "application/pdf" => ".pdf",
        "text/plain" => ".txt",
        "application/x-tgsticker" => ".tgs",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hostile_names_become_plain_names() {
        assert_eq!(safe_name(Some("../../x"), "document", None), "x");
        assert_eq!(
            safe_name(Some("..\\..\\boot.ini"), "document", None),
            "boot.ini"
        );
        assert_eq!(safe_name(Some("/etc/passwd"), "document", None), "passwd");
        assert_eq!(
            safe_name(Some(".."), "document", Some("text/plain")),
            "document.txt"
        );
        assert_eq!(safe_name(Some(".bashrc"), "document", None), "bashrc");
        assert_eq!(
            safe_name(Some("a\u{0}b\nc.txt"), "document", None),
            "a_b_c.txt"
        );
        assert_eq!(
            safe_name(Some("Überweisung März.pdf"), "document", None),
            "berweisung_M_rz.pdf"
        );
        assert_eq!(
            safe_name(Some("\u{fffd}\u{fffd}"), "voice", Some("audio/ogg")),
            "voice.ogg"
        );
        assert_eq!(safe_name(None, "photo", Some("image/jpeg")), "photo.jpg");
        let long = format!("{}.tar.gz", "n".repeat(500));
        let cut = safe_name(Some(&long), "document", None);
        assert_eq!(cut.len(), MAX_NAME_BYTES);
        assert!(cut.ends_with(".gz"));
    }

    proptest! {
        #[test]
        fn any_name_is_one_safe_component(name in any::<String>(), kind in "[a-z_]{1,10}") {
            let n = safe_name(Some(&name), &kind, None);
            prop_assert!(!n.is_empty());
            prop_assert!(n.len() <= MAX_NAME_BYTES);
            prop_assert!(!n.starts_with('.'));
            prop_assert!(n != "." && n != "..");
            prop_assert!(n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+')));
            let joined = std::path::Path::new("/d").join(&n);
            prop_assert_eq!(joined.parent(), Some(std::path::Path::new("/d")));
        }
    }
}
