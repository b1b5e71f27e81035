//! Hub protocol lines: the bytes through the line reader (a small limit and a small buffer so
//! the limit and the refills are reached), then every line as both directions' messages.

use std::cell::RefCell;

use serde::Serialize;
use serde::de::DeserializeOwned;
use wire::{ClientMsg, HubMsg, LineError, LineReader, PiEvent};

/// The line limit here: small, so inputs the fuzzer can reach cross it.
const LIMIT: usize = 512;

thread_local! {
    // One runtime per thread: building one per input would dominate the run.
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// Any bytes as a stream of protocol lines: the reader never panics and only returns lines
/// within the limit, without `\n`, not blank; every line (and the whole input) that parses as
/// a message re-serialises to one line that parses to the same message.
pub fn wire_line(data: &[u8]) {
    for line in read_lines(data) {
        assert!(
            line.len() <= LIMIT,
            "a line over the limit: {} bytes",
            line.len()
        );
        assert!(!line.contains('\n'), "a line holds a newline: {line:?}");
        assert!(
            !line.bytes().all(|b| b.is_ascii_whitespace()),
            "a blank line was returned"
        );
        message(&line);
    }
    message(&crate::text(data));
}

/// The lines the reader returns until the end or its first error.
fn read_lines(data: &[u8]) -> Vec<String> {
    let read = async {
        let mut reader =
            LineReader::with_limit(tokio::io::BufReader::with_capacity(7, data), LIMIT);
        let mut lines = Vec::new();
        loop {
            match reader.next_line().await {
                Ok(Some(line)) => lines.push(line),
                Ok(None) | Err(LineError::TooLong(_) | LineError::NotUtf8) => return lines,
                Err(LineError::Io(e)) => panic!("reading from memory failed: {e}"),
            }
        }
    };
    RUNTIME.with(|cell| {
        let mut cell = cell.borrow_mut();
        let runtime = cell.get_or_insert_with(|| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap_or_else(|e| panic!("no runtime: {e}"))
        });
        runtime.block_on(read)
    })
}

fn message(line: &str) {
    if let Some(ClientMsg::Event { event, .. }) = round_trip::<ClientMsg>(line) {
        event_accessors(&event);
    }
    round_trip::<HubMsg>(line);
    if let Ok(event) = serde_json::from_str::<PiEvent>(line) {
        event_accessors(&event);
    }
}

/// Parses `line` as `T`; whatever parses encodes to one line that parses to the same value.
fn round_trip<T>(line: &str) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let msg: T = serde_json::from_str(line).ok()?;
    let encoded = wire::encode(&msg);
    let body = encoded.strip_suffix('\n');
    assert!(
        body.is_some_and(|b| !b.contains('\n')),
        "encode gave more than one line: {encoded:?}"
    );
    let again: Result<T, _> = serde_json::from_str(body.unwrap_or_default());
    match again {
        Ok(again) => assert_eq!(again, msg, "the message changed through {encoded:?}"),
        Err(e) => panic!("{msg:?} encoded as {encoded:?} does not parse: {e}"),
    }
    Some(msg)
}

/// pi's events are read through accessors that must take any JSON.
fn event_accessors(event: &PiEvent) {
    let _ = event.kind();
    let _ = event.aborted();
    let _ = event.message();
    let _ = event.assistant_message();
    let _ = event.queued_count();
}
