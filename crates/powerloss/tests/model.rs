//! The model of crate doc, on a real mount: what is synced survives a cut, nothing else does.
#![allow(clippy::unwrap_used)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;

use powerloss::PowerFs;

#[test]
fn a_cut_keeps_what_was_synced_and_nothing_else() {
    if let Some(why) = powerloss::unavailable() {
        eprintln!("SKIPPED: power-loss tests need FUSE: {why}");
        return;
    }
    let at = tempfile::tempdir().unwrap();
    let fs = PowerFs::new();
    let m = fs.mount(at.path()).unwrap();
    let p = at.path();
    let mut f = File::create(p.join("kept")).unwrap();
    f.write_all(b"synced").unwrap();
    f.sync_all().unwrap();
    f.write_all(b" and not").unwrap();
    File::create(p.join("never named"))
        .unwrap()
        .sync_all()
        .unwrap();
    // The directory synced after "kept" and before the others.
    File::open(p).unwrap().sync_all().unwrap();
    File::create(p.join("created after"))
        .unwrap()
        .sync_all()
        .unwrap();
    fs::rename(p.join("never named"), p.join("renamed")).unwrap();
    drop(f);
    assert_eq!(fs::read(p.join("kept")).unwrap(), b"synced and not");
    m.unmount().unwrap();
    fs.cut();
    let m = fs.mount(p).unwrap();
    assert_eq!(fs::read(p.join("kept")).unwrap(), b"synced");
    assert!(
        p.join("never named").exists(),
        "a rename not synced is undone"
    );
    assert!(!p.join("renamed").exists());
    assert!(
        !p.join("created after").exists(),
        "a create not synced is undone"
    );
    // Truncation is pending too.
    let f = OpenOptions::new().write(true).open(p.join("kept")).unwrap();
    f.set_len(2).unwrap();
    drop(f);
    m.unmount().unwrap();
    fs.cut();
    let m = fs.mount(p).unwrap();
    assert_eq!(fs::read(p.join("kept")).unwrap(), b"synced");
    let st = fs.stats();
    assert_eq!(st.cuts, 2);
    assert!(st.files_reverted >= 2 && st.dirs_reverted >= 1, "{st:?}");
    m.unmount().unwrap();
}
