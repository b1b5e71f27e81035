//! Which machine this is, in the words a pi's extension uses in its hello (`machine`): a pi
//! that reaches `hub.sock` through a forwarded socket runs on another machine, so it outlives
//! a crash of this one and must be told only what is on this disk.

use std::sync::OnceLock;

/// This machine: its `/etc/machine-id` (systemd's and dbus's), else `host:<hostname>`. The
/// extension computes the same from the same sources.
pub fn this_machine() -> &'static str {
    static THIS: OnceLock<String> = OnceLock::new();
    THIS.get_or_init(|| {
        read_machine_id().unwrap_or_else(|| {
            let uname = rustix::system::uname();
            format!("host:{}", uname.nodename().to_string_lossy())
        })
    })
}

fn read_machine_id() -> Option<String> {
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| {
            let id = std::fs::read_to_string(p).ok()?;
            let id = id.trim();
            (!id.is_empty() && id.len() <= 128).then(|| id.to_owned())
        })
}

/// Whether a client that said it runs on `machine` is on another machine than this hub.
/// A client that does not say (an older extension) is taken to be where its link says.
pub fn is_elsewhere(machine: Option<&str>) -> bool {
    machine.is_some_and(|m| m != this_machine())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_here_and_another_is_not() {
        assert!(!this_machine().is_empty());
        assert!(!is_elsewhere(Some(this_machine())));
        assert!(!is_elsewhere(None));
        assert!(is_elsewhere(Some("host:somewhere-else")));
    }
}
