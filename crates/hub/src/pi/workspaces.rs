//! Where `/new` may start pi: folders under the configured `workspaces` roots, nowhere else.
//! A typed path is resolved (symlinks, `..`) before it is compared, so no spelling leaves a
//! root.

use std::path::{Path, PathBuf};

/// Why a folder was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FolderError {
    /// No roots are configured.
    #[error(
        "starting pi from Telegram needs \"workspaces\" in telegram.json: the folders under which pi may be started, e.g. \"workspaces\": [\"~/code\"]"
    )]
    NoRoots,
    /// The folder does not exist (or is not a folder).
    #[error("{0} is not a folder")]
    NotAFolder(String),
    /// Outside every root.
    #[error("{folder} is outside the workspaces ({roots}); pi is started only under them")]
    Outside {
        /// The resolved folder.
        folder: String,
        roots: String,
    },
}

/// The roots that exist, resolved.
pub fn resolved_roots(roots: &[PathBuf]) -> Vec<PathBuf> {
    roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .filter(|r| r.is_dir())
        .collect()
}

/// Resolves `input` (absolute, `~/…`, or relative to a root) to a folder under a root.
pub fn resolve(input: &str, roots: &[PathBuf]) -> Result<PathBuf, FolderError> {
    let roots = resolved_roots(roots);
    if roots.is_empty() {
        return Err(FolderError::NoRoots);
    }
    let input = input.trim();
    let candidates: Vec<PathBuf> = if let Some(rest) = input.strip_prefix("~/") {
        std::env::var_os("HOME")
            .map(|h| vec![PathBuf::from(h).join(rest)])
            .unwrap_or_default()
    } else if Path::new(input).is_absolute() {
        vec![PathBuf::from(input)]
    } else {
        roots.iter().map(|r| r.join(input)).collect()
    };
    let Some(folder) = candidates
        .iter()
        .find_map(|c| std::fs::canonicalize(c).ok().filter(|p| p.is_dir()))
    else {
        return Err(FolderError::NotAFolder(input.to_owned()));
    };
    if roots.iter().any(|r| folder.starts_with(r)) {
        Ok(folder)
    } else {
        Err(FolderError::Outside {
            folder: folder.display().to_string(),
            roots: roots_text(&roots),
        })
    }
}

/// The roots as the person reads them.
pub fn roots_text(roots: &[PathBuf]) -> String {
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Folders to offer: the recent ones (most recent first) that are still under a root, then
/// the roots' subfolders (not hidden), at most `max`, without repeats.
pub fn offered(roots: &[PathBuf], recent: &[String], max: usize) -> Vec<PathBuf> {
    let roots = resolved_roots(roots);
    let mut out: Vec<PathBuf> = Vec::new();
    let push = |p: PathBuf, out: &mut Vec<PathBuf>| {
        if out.len() < max && !out.contains(&p) {
            out.push(p);
        }
    };
    for r in recent {
        if let Ok(p) = std::fs::canonicalize(r)
            && p.is_dir()
            && roots.iter().any(|root| p.starts_with(root))
        {
            push(p, &mut out);
        }
    }
    for root in &roots {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut subs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        for s in subs {
            // A link inside a root may lead out of it.
            if let Ok(p) = std::fs::canonicalize(&s)
                && p.starts_with(root)
            {
                push(p, &mut out);
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_under_a_root_are_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("code");
        std::fs::create_dir_all(root.join("web/src")).unwrap();
        std::fs::create_dir_all(root.join("api")).unwrap();
        std::fs::create_dir_all(tmp.path().join("secret")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), root.join("link")).unwrap();
        let roots = vec![root.clone()];
        let real = std::fs::canonicalize(&root).unwrap();

        assert_eq!(resolve("web", &roots).unwrap(), real.join("web"));
        assert_eq!(resolve("web/src", &roots).unwrap(), real.join("web/src"));
        assert_eq!(
            resolve(&root.join("api").display().to_string(), &roots).unwrap(),
            real.join("api")
        );
        assert_eq!(resolve(".", &roots).unwrap(), real, "the root itself");
        for escape in ["../secret", "web/../../secret", "link"] {
            assert!(
                matches!(resolve(escape, &roots), Err(FolderError::Outside { .. })),
                "{escape}"
            );
        }
        assert!(matches!(
            resolve(&tmp.path().join("secret").display().to_string(), &roots),
            Err(FolderError::Outside { .. })
        ));
        assert!(matches!(
            resolve("nope", &roots),
            Err(FolderError::NotAFolder(_))
        ));
        assert_eq!(resolve("web", &[]), Err(FolderError::NoRoots));

        let recent = vec![
            real.join("api").display().to_string(),
            tmp.path().join("secret").display().to_string(),
        ];
        let offered = offered(&roots, &recent, 10);
        assert_eq!(offered[0], real.join("api"), "recent first");
        assert!(
            !offered.iter().any(|p| p.ends_with("secret")),
            "{offered:?}"
        );
        assert!(offered.contains(&real.join("web")));
    }
}
