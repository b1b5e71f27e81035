//! The names people see for pi instances.

use std::path::Path;

/// The name people see for an identity: the project folder's name (plus `#n` for a second pi
/// in the same folder).
pub fn label_of(identity: &str) -> String {
    let (path, suffix) = match identity.rsplit_once('#') {
        Some((p, n)) if n.bytes().all(|b| b.is_ascii_digit()) => (p, format!(" #{n}")),
        _ => (identity, String::new()),
    };
    let name = Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path);
    format!("{name}{suffix}")
}

/// The folder of an identity (`/p#2` -> `/p`).
pub fn folder_of(identity: &str) -> &str {
    match identity.rsplit_once('#') {
        Some((p, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => p,
        _ => identity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_folders() {
        assert_eq!(label_of("/home/me/web"), "web");
        assert_eq!(label_of("/home/me/web#2"), "web #2");
        assert_eq!(label_of("/"), "/");
        assert_eq!(folder_of("/home/me/web#2"), "/home/me/web");
        assert_eq!(folder_of("/a#b"), "/a#b");
    }
}
