//! `hub.secret`: 32 random bytes as hex, 0600. Every socket connection must present it; a process
//! that can read the file is one of the person's own.

use std::io::Write;
use std::path::Path;

/// Reads the secret, creating it first if needed.
pub fn ensure(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().len() == 64 && s.trim().bytes().all(|b| b.is_ascii_hexdigit()) => {
            return Ok(s.trim().to_owned());
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(secret.as_bytes())?;
    f.sync_all()?;
    Ok(secret)
}

/// Reads an existing secret.
pub fn read(path: &Path) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}
