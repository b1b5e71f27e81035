//! The shared sample lines (`tests/samples/wire-lines.json`; its `about` says what a case holds),
//! read the way this crate's users read them: a line from the extension through the hub's
//! [`LineReader`] and then [`read_hello`] (a connection's first line) or [`ClientMsg`], a line
//! from the hub through a [`LineReader`] and then [`HubMsg`] (the CLI's reading). The
//! extension's unit tests (`extension/test/wire.test.ts`) and the smoke harness's mock hub
//! (`extension/dev/smoke.py`) read the same file.

use serde_json::{Map, Value, json};
use wire::{ClientMsg, HelloError, HubMsg, LineError, LineReader, read_hello};

const SAMPLES: &str = include_str!("samples/wire-lines.json");
const PAD: &str = "@PAD@";

/// What one of this crate's readers makes of a case's line, in the file's terms.
async fn read(case: &Map<String, Value>, bytes: &[u8]) -> Value {
    let mut input = bytes.to_vec();
    input.push(b'\n');
    // A small buffer: the reader refills it many times within one line.
    let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(977, &input[..]));
    let line = match reader.next_line().await {
        Ok(Some(line)) => line,
        Ok(None) => return json!("blank"),
        Err(LineError::TooLong(_)) => return json!({"rejected": "too_long"}),
        Err(LineError::NotUtf8) => return json!({"rejected": "not_utf8"}),
        Err(LineError::Io(e)) => return json!({"rejected": format!("io: {e}")}),
    };
    match reader.next_line().await {
        Ok(None) => {}
        other => return json!({"rejected": format!("more than one line: {other:?}")}),
    }
    let from_extension = match case.get("from").and_then(Value::as_str) {
        Some("extension") => true,
        Some("hub") => false,
        other => return json!({"rejected": format!("from is {other:?}")}),
    };
    let first = case.get("first").and_then(Value::as_bool).unwrap_or(false);
    if from_extension && first {
        return match read_hello(&line) {
            Ok((hello, left_out)) => {
                json!({"message": to_json(&ClientMsg::Hello(hello)), "left_out": left_out})
            }
            Err(HelloError::NotJson(_)) => json!({"rejected": "not_json"}),
            Err(HelloError::NotHello) => json!({"rejected": "not_hello"}),
            Err(HelloError::NoProtocol) => json!({"rejected": "no_protocol"}),
            Err(HelloError::NoRole) => json!({"rejected": "no_role"}),
        };
    }
    if from_extension {
        match serde_json::from_str::<ClientMsg>(&line) {
            Ok(ClientMsg::Unknown) => json!("ignored"),
            Ok(msg) => json!({"message": to_json(&msg)}),
            Err(e) => rejected(&line, &e),
        }
    } else {
        match serde_json::from_str::<HubMsg>(&line) {
            Ok(HubMsg::Unknown) => json!("ignored"),
            Ok(msg) => json!({"message": to_json(&msg)}),
            Err(e) => rejected(&line, &e),
        }
    }
}

fn to_json<T: serde::Serialize>(msg: &T) -> Value {
    serde_json::to_value(msg).unwrap_or_else(|e| json!(format!("cannot serialize: {e}")))
}

/// Why serde_json refused a line, in the file's terms.
fn rejected(line: &str, e: &serde_json::Error) -> Value {
    use serde_json::error::Category;
    let why = match e.classify() {
        Category::Syntax | Category::Eof => "not_json",
        Category::Data => match serde_json::from_str::<Value>(line) {
            Ok(v) if !v.is_object() => "not_object",
            _ => "invalid",
        },
        Category::Io => "io",
    };
    json!({ "rejected": why })
}

/// The case's line as bytes, padded, and the x's that replace `@PAD@`.
fn line_of(case: &Map<String, Value>) -> Result<(Vec<u8>, Option<String>), String> {
    let mut bytes = match (case.get("line"), case.get("line_hex")) {
        (Some(Value::String(line)), None) => line.as_bytes().to_vec(),
        (None, Some(Value::String(hex))) => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("?"), 16))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("line_hex: {e}"))?,
        _ => return Err("needs one of line and line_hex".into()),
    };
    let Some(to) = case.get("pad_to_bytes") else {
        return Ok((bytes, None));
    };
    let to = to
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("pad_to_bytes is not a size")?;
    let at = bytes
        .windows(PAD.len())
        .position(|w| w == PAD.as_bytes())
        .ok_or("pad_to_bytes without @PAD@ in the line")?;
    let pad = "x".repeat(to + PAD.len() - bytes.len());
    bytes.splice(at..at + PAD.len(), pad.bytes());
    Ok((bytes, Some(pad)))
}

/// `v` with `@PAD@` in its strings replaced by `pad`.
fn padded(v: &Value, pad: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace(PAD, pad)),
        Value::Array(a) => a.iter().map(|x| padded(x, pad)).collect(),
        Value::Object(o) => o.iter().map(|(k, x)| (k.clone(), padded(x, pad))).collect(),
        other => other.clone(),
    }
}

/// A value for a failure message: long strings (the padded lines) shortened.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 600 {
        return s;
    }
    let cut = (0..=600)
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}… ({} bytes)", &s[..cut], s.len())
}

#[tokio::test]
async fn every_sample_line_reads_as_the_file_says() {
    let file: Value = serde_json::from_str(SAMPLES).unwrap_or_else(|e| panic!("{e}"));
    let cases = file["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases"));
    let mut failures = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut read_here = 0;
    for case in cases {
        let Some(case) = case.as_object() else {
            failures.push(format!("not an object: {}", shown(case)));
            continue;
        };
        let text = |key: &str| case.get(key).and_then(Value::as_str).unwrap_or("?");
        let name = format!("{}/{}", text("from"), text("name"));
        if !names.insert(name.clone()) {
            failures.push(format!("{name}: the name is taken"));
        }
        let (bytes, pad) = match line_of(case) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let Some(want) = case.get("rust").or_else(|| case.get("expect")) else {
            failures.push(format!("{name}: no expect"));
            continue;
        };
        let want = pad
            .as_deref()
            .map_or_else(|| want.clone(), |p| padded(want, p));
        let got = read(case, &bytes).await;
        read_here += 1;
        if got != want {
            failures.push(format!(
                "{name}:\n  wanted {}\n  got    {}",
                shown(&want),
                shown(&got)
            ));
        }
    }
    assert!(read_here >= 100, "only {read_here} cases");
    assert!(
        failures.is_empty(),
        "{} of {} sample lines:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
