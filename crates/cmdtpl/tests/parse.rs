//! Parsing: accepted shapes, rejected keys and values, warnings.

use cmdtpl::{ArgDecl, Template, TemplateError};
use serde_json::json;

fn err(v: serde_json::Value) -> TemplateError {
    match Template::parse(&v) {
        Ok(_) => panic!("{v} should not parse"),
        Err(e) => e,
    }
}

#[test]
fn accepts_every_documented_shape() {
    let shapes = [
        json!("/path/to/stt --file {file} --lang {lang=ru}"),
        json!(["a {x}", "b", ["c", "d"], {"template": "e"}]),
        json!({
            "label": "tts",
            "parallel": false,
            "when": "!quiet",
            "args": ["text", "file:path", "timeout:int", "mode:enum(check,fix)"],
            "defaults": {"lang": "en", "rate": 1.5, "n": 3, "on": true, "list": ["a", 1]},
            "timeout": "{timeout=60000}",
            "delay": 0,
            "output": "ogg",
            "retry": 2,
            "failure": "branch",
            "recover": ["cleanup {ogg}", {"failure": "continue", "template": "rm -f {mp3}"}],
            "template": ["tts {text} {mp3}", {"defaults": {"codec": "opus"}, "template": "ffmpeg -i {mp3} {ogg}"}]
        }),
        json!({"output": "{ogg}", "template": "x"}),
        json!({"output": "stdout", "template": "x"}),
        json!({"template": ["x", {"output": "stdout", "template": "y"}]}),
        json!({"when": true, "timeout": 0, "template": "x"}),
        json!({"when": "{mode?yes:}", "timeout": "1500", "template": "x"}),
    ];
    for s in shapes {
        if let Err(e) = Template::parse(&s) {
            panic!("{s} should parse: {e}");
        }
    }
    let t = Template::parse(&json!({"label": "l", "args": ["file:path", "x"], "template": "a"}))
        .expect("parses");
    assert_eq!(t.label(), Some("l"));
    assert_eq!(
        t.args(),
        Some(
            &[
                ArgDecl {
                    name: "file".into(),
                    kind: Some("path".into())
                },
                ArgDecl {
                    name: "x".into(),
                    kind: None
                }
            ][..]
        )
    );
    assert!(t.is_single_command());
    let from_str: Template = "printf %s {file}".parse().expect("string form");
    assert!(from_str.mentions("file") && !from_str.mentions("mime"));
}

#[test]
fn unsupported_keys_are_rejected() {
    let e = err(json!({"parallel": true, "template": ["a", "b"]}));
    assert!(matches!(&e, TemplateError::Unsupported { key, .. } if key == "parallel"));
    assert!(e.to_string().contains("not supported"), "{e}");

    let e = err(json!({"repeat": 8, "template": "render {index}"}));
    assert!(matches!(&e, TemplateError::Unsupported { key, .. } if key == "repeat"));

    // A nested step may not select a file result.
    let e = err(json!(["a", {"output": "ogg", "template": "b"}]));
    assert!(
        matches!(&e, TemplateError::Unsupported { key, at, .. } if key == "output" && at == "root[1]")
    );

    // Keys outside the standard, including retired ones (`pipe`, `critical`, `command`).
    for key in ["command", "pipe", "critical", "type", "async"] {
        let mut obj = serde_json::Map::new();
        obj.insert(key.into(), json!("x"));
        obj.insert("template".into(), json!("a"));
        let e = err(serde_json::Value::Object(obj));
        assert!(
            matches!(&e, TemplateError::UnknownKey { key: k, .. } if k == key),
            "{key}: {e}"
        );
    }

    // Deep inside a composition or a recover template, with its location.
    let e = err(
        json!({"template": ["a", {"recover": {"bogus": 1, "template": "r"}, "template": "b"}]}),
    );
    assert!(
        matches!(&e, TemplateError::UnknownKey { at, key } if at == "root[1].recover" && key == "bogus"),
        "{e}"
    );
}

#[test]
fn host_keys_are_skipped_only_at_the_top() {
    let handler = json!({"type": "voice", "mime": "audio/*", "template": "stt {file}"});
    assert!(Template::parse(&handler).is_err());
    assert!(Template::parse_with_host_keys(&handler, &["type", "mime", "match"]).is_ok());
    let nested = json!({"template": [{"type": "voice", "template": "x"}]});
    assert!(Template::parse_with_host_keys(&nested, &["type"]).is_err());
}

#[test]
fn invalid_values_are_rejected() {
    let cases = [
        (json!(42), "root"),
        (json!(""), "root"),
        (json!("   "), "root"),
        (json!([]), "root"),
        (json!({"label": "x"}), "root"),
        (json!({"template": {"template": "x"}}), "root"),
        (json!({"template": "echo 'open"}), "root"),
        (json!({"template": "echo \"open"}), "root"),
        (json!({"template": "echo x\\"}), "root"),
        (json!({"failure": "abort", "template": "x"}), "root"),
        (json!({"timeout": -1, "template": "x"}), "root"),
        (json!({"timeout": 1.5, "template": "x"}), "root"),
        (json!({"timeout": "soon", "template": "x"}), "root"),
        (json!({"retry": true, "template": "x"}), "root"),
        (json!({"when": "a b", "template": "x"}), "root"),
        (json!({"when": 1, "template": "x"}), "root"),
        (json!({"args": "x", "template": "x"}), "root"),
        (
            json!({"args": ["timeout:int=60000"], "template": "x"}),
            "root",
        ),
        (json!({"args": ["bad name"], "template": "x"}), "root"),
        (
            json!({"defaults": {"x": {"y": 1}}, "template": "x"}),
            "root",
        ),
        (json!({"defaults": {"x": null}, "template": "x"}), "root"),
        (json!({"defaults": [], "template": "x"}), "root"),
        (json!({"output": "a file.ogg", "template": "x"}), "root"),
        (json!({"output": 1, "template": "x"}), "root"),
        (json!({"parallel": "yes", "template": "x"}), "root"),
        (json!(["ok", ["fine", 7]]), "root[1][1]"),
    ];
    for (v, at) in cases {
        let e = err(v.clone());
        assert!(e.to_string().starts_with(&format!("{at}:")), "{v}: {e}");
    }
    assert!(matches!(
        err(json!({"args": ["timeout:int=60000"], "template": "x"})),
        TemplateError::InvalidField { why, .. } if why.contains("defaults")
    ));
}

#[test]
fn risky_shapes_are_flagged() {
    let warnings = |v: serde_json::Value| Template::parse(&v).expect("parses").risky();
    let has = |w: &[String], needle: &str| w.iter().any(|s| s.contains(needle));

    let w = warnings(json!("sh -c 'echo {text}'"));
    assert!(has(&w, "`sh -c` runs shell code"), "{w:?}");
    assert!(has(&warnings(json!("bash -lc x")), "`bash -c`"));
    assert!(has(&warnings(json!("/bin/bash script.sh")), "runs a shell"));
    assert!(has(
        &warnings(json!("node -e 'x()'")),
        "`node` evaluates code"
    ));
    assert!(has(
        &warnings(json!("python3 -c 'print(1)'")),
        "`python3` evaluates code"
    ));
    assert!(has(&warnings(json!("perl -e 1")), "`perl` evaluates code"));
    assert!(has(
        &warnings(json!("rm -f {file}")),
        "`rm` over a placeholder-derived path"
    ));
    assert!(has(
        &warnings(json!("sudo rm -rf /")),
        "`rm` over a broad path (`/`)"
    ));
    assert!(has(
        &warnings(json!("env A=1 mv {a} {b}")),
        "`mv` over a placeholder"
    ));
    assert!(has(
        &warnings(json!("{cmd} --x")),
        "executable comes from a placeholder"
    ));
    assert!(has(
        &warnings(json!("cat a | grep b")),
        "`|` is passed as a literal"
    ));
    assert!(has(
        &warnings(json!("echo $HOME")),
        "`$HOME` is not expanded"
    ));
    // Inside compositions and recover templates, with the location.
    let w = warnings(json!({"retry": 2, "recover": "rm -rf {dir}", "template": ["a", "b"]}));
    assert!(w.iter().any(|s| s.starts_with("root.recover:")), "{w:?}");

    for benign in [
        json!("/path/to/stt --file {file} --lang {lang=ru}"),
        json!(["printf %s {text}", "tr a-z A-Z", "echo '|'"]),
        json!("rm -f /tmp/fixed-name"),
        json!("python3 script.py {file}"),
    ] {
        assert_eq!(warnings(benign.clone()), Vec::<String>::new(), "{benign}");
    }
}
