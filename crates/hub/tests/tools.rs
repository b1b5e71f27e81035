//! pi's `telegram_attach` through `hub.sock`, from a scripted instance: what is not a regular
//! file it can send whole (a FIFO, a device, a kernel file that says it is empty, a file over
//! the limit) is a tool error the model reads, and no copy of it stays in `out/`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{Shim, TestHub};
use serde_json::{Value, json};

async fn attach(pi: &mut Shim, id: &str, path: &str) -> Value {
    pi.send(
        &json!({ "type": "tool_call", "id": id, "tool": "telegram_attach", "turn_id": null,
                     "args": { "paths": [path] } }),
    )
    .await;
    let r = pi.recv_type("response").await;
    assert_eq!(r["id"], json!(id));
    r
}

/// The tool's error (the call must have failed).
fn refusal(r: &Value) -> String {
    assert_eq!(r["ok"], json!(false), "{r}");
    r["error"].as_str().unwrap().to_owned()
}

fn copies(out: &Path) -> usize {
    std::fs::read_dir(out).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refuses_what_it_cannot_send_whole_and_keeps_no_copy() {
    let mut hub = TestHub::prepare(
        tg_fake::FakeConfig::default(),
        json!({ "outboundAttachmentMaxBytes": 4096 }),
    )
    .await;
    hub.launch().await;
    let work = hub.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = hub.dir.path().join("tmp/telegram/default/out");
    let mut pi = hub.shim(work.to_str().unwrap(), 51).await;

    let fifo = work.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let why = refusal(&attach(&mut pi, "fifo", "pipe").await);
    assert!(
        why.contains("pipe is a named pipe (FIFO), not a regular file"),
        "{why}"
    );
    // Through a link too: what the path resolves to counts.
    std::os::unix::fs::symlink(&fifo, work.join("link")).unwrap();
    let why = refusal(&attach(&mut pi, "link", "link").await);
    assert!(why.contains("link is a named pipe (FIFO)"), "{why}");
    let why = refusal(&attach(&mut pi, "device", "/dev/zero").await);
    assert!(
        why.contains("/dev/zero is a device, not a regular file"),
        "{why}"
    );
    if cfg!(target_os = "linux") {
        // Size 0 and endless: copied, it filled the disk.
        let why = refusal(&attach(&mut pi, "proc", "/proc/self/pagemap").await);
        assert!(
            why.contains("/proc/self/pagemap is a file of /proc, whose size says nothing"),
            "{why}"
        );
    }
    // Sparse: a gigabyte that takes no room, far over the limit.
    std::fs::File::create(work.join("sparse.img"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let why = refusal(&attach(&mut pi, "sparse", "sparse.img").await);
    assert!(
        why.contains("sparse.img is 1.1 GB, over the 4.1 KB limit"),
        "{why}"
    );
    assert_eq!(copies(&out), 0, "a copy was left in {}", out.display());

    // What it can send, it sends: that copy is there.
    std::fs::write(work.join("notes.txt"), "fine\n").unwrap();
    let r = attach(&mut pi, "ok", "notes.txt").await;
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(
        r["data"]["text"],
        json!("Sent to Telegram: notes.txt (5 B).")
    );
    assert_eq!(copies(&out), 1);
    hub.stop().await;
}
