//! The fake adds no transport stall of its own. An HTTP server that leaves Nagle's algorithm on
//! and writes a response in two pieces (headers, then body) holds the second piece until the
//! client acknowledges the first, and a client delaying its ACKs waits ~40 ms for nothing: every
//! request on a kept-alive connection would then take >= 40 ms, which would be charged to the
//! hub in every latency figure measured against the fake.
//!
//! The client here is deliberately plain: std's TcpStream with Nagle on and the kernel's
//! delayed ACKs, one write per request, reading until the whole body has arrived. The median
//! over many requests is compared with half the stall, so a busy machine slowing a few requests
//! cannot fail it, and a stall on every request cannot pass. A deliberately stalling server
//! measured by the same client shows the check can fail (hyper writes an answer in one piece, so
//! taking `set_nodelay` out of tg-fake alone does not bring the stall back).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tg_fake::{FakeConfig, FakeServer};

const TOKEN: &str = "1000:fake-token";

/// One request on the kept-alive connection; returns the body.
fn call(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
    host: &str,
    body: &str,
) -> String {
    let request = format!(
        "POST /bot{TOKEN}/sendMessage HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    writer.write_all(request.as_bytes()).unwrap();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut out = vec![0; length];
    reader.read_exact(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The median time of 40 kept-alive requests to `addr`.
fn median_request(addr: &str, body: &dyn Fn(usize) -> String) -> (Duration, Vec<Duration>) {
    let stream = TcpStream::connect(addr).unwrap();
    assert!(!stream.nodelay().unwrap(), "the client keeps Nagle on");
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut took = Vec::new();
    for i in 0..40 {
        let t0 = Instant::now();
        let answer = call(&mut reader, &mut writer, addr, &body(i));
        took.push(t0.elapsed());
        assert!(answer.contains(r#""ok":true"#), "{answer}");
    }
    took.sort_unstable();
    (took[took.len() / 2], took)
}

/// The stall this test is about, on purpose: a server with Nagle on that writes the headers and
/// the body of each answer separately. The same client measuring it shows that the check below
/// can fail.
#[test]
fn the_client_sees_the_stall_of_a_server_that_writes_headers_and_body_apart() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        loop {
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end().to_ascii_lowercase();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let answer = r#"{"ok":true,"result":{}}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                answer.len()
            );
            writer.write_all(head.as_bytes()).unwrap();
            writer.write_all(answer.as_bytes()).unwrap();
        }
    });
    let (median, took) = median_request(&addr, &|i| format!(r#"{{"text":"message {i}"}}"#));
    assert!(
        median >= Duration::from_millis(30),
        "expected the ~40 ms stall, got a median of {median:?}: {took:?}"
    );
}

#[test]
fn kept_alive_requests_are_not_held_by_nagle_and_delayed_acks() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeServer::start(FakeConfig::default()))
        .unwrap();
    let owner = tg_fake::DEFAULT_USER_ID;
    // The bot may write to the person once they wrote to it.
    fake.control()
        .send_text(tg_fake::control::SendText {
            text: "hi".into(),
            ..Default::default()
        })
        .unwrap();
    let addr = fake.base_url().trim_start_matches("http://").to_owned();
    let (median, took) = median_request(&addr, &|i| {
        format!(r#"{{"chat_id":{owner},"text":"message {i}"}}"#)
    });
    assert!(
        median < Duration::from_millis(20),
        "median {median:?} per kept-alive request (a Nagle/delayed-ACK stall is ~40 ms): {took:?}"
    );
}
