//! What Telegram shows of the hub's messages for an answer: each piece of the delivery plan
//! read back the way tg-fake (and Telegram) reads it. Rich messages through the rich message
//! converter (`RichMessage` blocks); text messages through the HTML entity parser, control
//! character cleaning, trimming and Telegram's own entity detection, as `sendMessage` does.

use serde_json::Value;
use tg_format::markdown::layout::RULE;

use super::expected::Mode;
use super::seen::{Builder, Fmt, Marker, Tok, url_key};

/// The tokens of the messages `plans` would send, in `mode`, or why Telegram would refuse one.
pub fn seen(plans: &[hub::outgoing::delivery::Plan], mode: Mode) -> Result<Vec<Tok>, String> {
    let mut b = Builder::default();
    if mode == Mode::Html {
        b.rule = Some(RULE);
    }
    for plan in plans {
        // A message as stored: its parameters under their Bot API names, and its method.
        let params = serde_json::to_value(plan.current().ok_or("a plan without a message")?)
            .map_err(|e| e.to_string())?;
        let method = params["method"].as_str().unwrap_or_default();
        match (mode, method) {
            (Mode::Rich, "sendRichMessage") => {
                let input = params.get("rich_message").ok_or("no rich_message")?;
                let message = tg_model::rich::convert(input, &tg_model::rich::Limits::default())
                    .map_err(|e| format!("refused: {e}"))?;
                for block in message["blocks"].as_array().into_iter().flatten() {
                    rich_block(&mut b, block, &Fmt::default());
                }
            }
            (Mode::Html, "sendMessage") => {
                let alt = &plan.alternatives[plan.alt];
                for message in &alt.messages {
                    let message = serde_json::to_value(message).map_err(|e| e.to_string())?;
                    let text = message["text"].as_str().ok_or("no text")?;
                    html_message(&mut b, text)?;
                    b.brk();
                }
            }
            (_, m) => return Err(format!("unexpected method {m} in {mode:?} mode")),
        }
        b.brk();
    }
    Ok(b.finish(mode == Mode::Html))
}

fn rich_block(b: &mut Builder, block: &Value, fmt: &Fmt) {
    let text = |b: &mut Builder, f: &Fmt| rich_text(b, &block["text"], f);
    match block["type"].as_str().unwrap_or_default() {
        "paragraph" | "footer" | "thinking" | "pullquote" | "expandable_blockquote" => {
            text(b, fmt);
            b.brk();
        }
        "heading" => {
            let level = block["size"].as_u64().and_then(|s| u8::try_from(s).ok());
            text(
                b,
                &Fmt {
                    heading: level,
                    ..fmt.clone()
                },
            );
            b.brk();
        }
        "pre" => {
            let mut s = String::new();
            plain(&block["text"], &mut s);
            b.push(Tok::Code {
                lang: block["language"].as_str().map(str::to_owned),
                text: s,
                quote: fmt.quote,
            });
        }
        "divider" => b.push(Tok::Rule),
        "list" => {
            for item in block["items"].as_array().into_iter().flatten() {
                b.brk();
                let label = item["label"].as_str().unwrap_or_default();
                if let Some(n) = label.strip_suffix('.').and_then(|n| n.parse().ok()) {
                    b.push(Tok::Marker(Marker::Number(n)));
                    if item["has_checkbox"] == Value::Bool(true) {
                        b.push(Tok::Marker(Marker::Task(
                            item["is_checked"] == Value::Bool(true),
                        )));
                    }
                } else if item["has_checkbox"] == Value::Bool(true) {
                    b.push(Tok::Marker(Marker::Task(
                        item["is_checked"] == Value::Bool(true),
                    )));
                } else {
                    b.push(Tok::Marker(Marker::Bullet));
                }
                for inner in item["blocks"].as_array().into_iter().flatten() {
                    rich_block(b, inner, fmt);
                }
            }
            b.brk();
        }
        "blockquote" => {
            let inner = Fmt {
                quote: fmt.quote + 1,
                ..fmt.clone()
            };
            b.brk();
            for inner_block in block["blocks"].as_array().into_iter().flatten() {
                rich_block(b, inner_block, &inner);
            }
            b.brk();
        }
        "details" => {
            rich_text(b, &block["summary"], fmt);
            b.brk();
            for inner in block["blocks"].as_array().into_iter().flatten() {
                rich_block(b, inner, fmt);
            }
        }
        "table" => {
            for (row, cells) in block["cells"].as_array().into_iter().flatten().enumerate() {
                for (col, cell) in cells.as_array().into_iter().flatten().enumerate() {
                    b.push(Tok::Cell {
                        head: cell["is_header"] == Value::Bool(true),
                        row,
                        col,
                    });
                    rich_text(b, &cell["text"], fmt);
                }
            }
            b.brk();
        }
        "mathematical_expression" => {
            b.text(block["expression"].as_str().unwrap_or_default(), fmt);
            b.brk();
        }
        _ => {}
    }
}

fn rich_text(b: &mut Builder, t: &Value, fmt: &Fmt) {
    match t {
        Value::String(s) => b.text(s, fmt),
        Value::Array(parts) => parts.iter().for_each(|p| rich_text(b, p, fmt)),
        Value::Object(o) => {
            let mut f = fmt.clone();
            match o.get("type").and_then(Value::as_str).unwrap_or_default() {
                "bold" => f.bold = true,
                "italic" => f.italic = true,
                "strikethrough" => f.strike = true,
                "code" => f.code = true,
                "url" => f.link = o.get("url").and_then(Value::as_str).map(url_key),
                "email_address" => {
                    f.link = o
                        .get("email_address")
                        .and_then(Value::as_str)
                        .map(|e| url_key(&format!("mailto:{e}")));
                }
                "custom_emoji" => {
                    b.text(o["alternative_text"].as_str().unwrap_or_default(), fmt);
                    return;
                }
                "mathematical_expression" => {
                    b.text(o["expression"].as_str().unwrap_or_default(), fmt);
                    return;
                }
                _ => {}
            }
            if let Some(inner) = o.get("text") {
                rich_text(b, inner, &f);
            }
        }
        _ => {}
    }
}

fn plain(t: &Value, out: &mut String) {
    match t {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => parts.iter().for_each(|p| plain(p, out)),
        Value::Object(o) => {
            if let Some(inner) = o.get("text") {
                plain(inner, out);
            }
        }
        _ => {}
    }
}

/// One `parse_mode: HTML` message as Telegram stores it.
fn html_message(b: &mut Builder, html: &str) -> Result<(), String> {
    let parsed = tg_model::html::parse(html).map_err(|e| format!("refused: {e}"))?;
    let parsed = tg_model::html::trim(tg_model::html::clean(parsed));
    let entities = tg_model::entities::merge_detected(&parsed.text, parsed.entities);
    let text = parsed.text;
    // Formatting per UTF-16 position.
    let units = tg_format::utf16::len(&text);
    let mut fmts = vec![Fmt::default(); units];
    let mut pre_at: Vec<Option<Option<String>>> = vec![None; units];
    for e in &entities {
        let (Some(offset), Some(length)) = (e["offset"].as_u64(), e["length"].as_u64()) else {
            continue;
        };
        let range = offset as usize..(offset + length) as usize;
        let covered = tg_format::utf16::slice(&text, range.start, range.len()).unwrap_or_default();
        for i in range.clone().filter(|i| *i < units) {
            let f = &mut fmts[i];
            match e["type"].as_str().unwrap_or_default() {
                "bold" => f.bold = true,
                "italic" => f.italic = true,
                "strikethrough" => f.strike = true,
                "code" => f.code = true,
                "pre" => pre_at[i] = Some(e["language"].as_str().map(str::to_owned)),
                "text_link" => f.link = e["url"].as_str().map(url_key),
                "url" => f.link = Some(url_key(covered)),
                "email" => f.link = Some(url_key(&format!("mailto:{covered}"))),
                "blockquote" | "expandable_blockquote" => f.quote = 1,
                _ => {}
            }
        }
    }
    let mut pos = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let here = pos;
        pos += c.len_utf16();
        if let Some(lang) = pre_at.get(here).cloned().flatten() {
            // A code block: its whole text as it is.
            let quote = fmts[here].quote;
            let mut code = String::from(c);
            while let Some(&n) = chars.peek() {
                if pre_at.get(pos).cloned().flatten().as_ref() != Some(&lang) {
                    break;
                }
                code.push(n);
                pos += n.len_utf16();
                chars.next();
            }
            match grid_cells(&code) {
                Some(rows) => {
                    for (row, cells) in rows.iter().enumerate() {
                        for (col, cell) in cells.iter().enumerate() {
                            b.push(Tok::Cell {
                                head: false,
                                row,
                                col,
                            });
                            b.text(cell, &Fmt::default());
                        }
                    }
                    b.brk();
                }
                None => b.push(Tok::Code {
                    lang,
                    text: code,
                    quote,
                }),
            }
            continue;
        }
        b.ch(c, &fmts.get(here).cloned().unwrap_or_default());
    }
    Ok(())
}

/// The cells of an aligned grid (`a │ b`, a rule of `─` and `┼`, rows), or `None` when `code`
/// is not one.
fn grid_cells(code: &str) -> Option<Vec<Vec<String>>> {
    let lines: Vec<&str> = code.split('\n').collect();
    let rule = lines.get(1)?;
    if rule.is_empty() || !rule.chars().all(|c| c == '─' || c == '┼') {
        return None;
    }
    let columns = rule.matches('┼').count() + 1;
    Some(
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, l)| {
                let mut cells: Vec<String> = l.split('│').map(|c| c.trim().to_owned()).collect();
                cells.resize(columns, String::new());
                cells
            })
            .collect(),
    )
}
