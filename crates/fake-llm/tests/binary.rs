//! The `fake-llm` binary: port file, base URL on stdout, stops on SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};

#[test]
fn prints_url_writes_port_file_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("llm.port");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-llm"))
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    stdout.read_line(&mut url).unwrap();
    let url = url.trim();
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(url, format!("http://127.0.0.1:{port}/v1"));
    assert!(!dir.path().join("llm.port.tmp").exists());

    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        conn,
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).unwrap();
    assert!(response.contains("fake-model"), "{response}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
