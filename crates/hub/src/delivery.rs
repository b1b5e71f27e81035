//! Rendered text on its way out: an outbox row per piece, each with a [`Plan`] of the messages
//! it is sent as. Alternatives are tried in order when Telegram refuses one (rich, then HTML,
//! then plain text), so a formatting problem never loses a word; a piece that is one rich
//! message may be several text messages, sent one after another from the same row, so the
//! conversation's order holds whatever happens.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tg_format::markdown::{self, RichBudget};

use crate::assistant::Rendering;

/// Text messages are cut this far below Telegram's 4096 so a label or a repeat mark fits.
pub const TEXT_PIECE: usize = 4000;

/// How one outbox row is delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What to send, best first.
    pub alternatives: Vec<Alternative>,
    /// The alternative in use.
    pub alt: usize,
    /// The message of it being sent.
    pub part: usize,
    /// The part sent again after an unknown outcome (it is marked as a possible repeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
}

/// One way to deliver a row: messages sent in order with one method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    /// `rich`, `html` or `plain`, for incidents.
    pub name: String,
    /// Bot API method.
    pub method: String,
    /// Parameters of each message.
    pub messages: Vec<Value>,
}

impl Plan {
    /// The method and parameters to send now.
    pub fn current(&self) -> Option<(&str, &Value)> {
        let a = self.alternatives.get(self.alt)?;
        a.messages.get(self.part).map(|p| (a.method.as_str(), p))
    }

    /// The plan after the current message arrived, if more messages follow.
    pub fn next_part(&self) -> Option<Plan> {
        let a = self.alternatives.get(self.alt)?;
        (self.part + 1 < a.messages.len()).then(|| Plan {
            part: self.part + 1,
            ..self.clone()
        })
    }

    /// The plan after Telegram refused the current message: the next alternative, from the
    /// same part when the two have as many messages (HTML and its plain text), else from its
    /// start (a refused rich message is the first and only message of its alternative).
    pub fn fallback(&self) -> Option<Plan> {
        let now = self.alternatives.get(self.alt)?;
        let next = self.alternatives.get(self.alt + 1)?;
        let part = if next.messages.len() == now.messages.len() {
            self.part
        } else {
            0
        };
        Some(Plan {
            alt: self.alt + 1,
            part,
            repeat: None,
            ..self.clone()
        })
    }

    /// The current alternative's name.
    pub fn name(&self) -> &str {
        self.alternatives
            .get(self.alt)
            .map_or("", |a| a.name.as_str())
    }

    /// Whether the current message is a copy sent after an unknown outcome.
    pub fn is_repeat(&self) -> bool {
        self.repeat == Some(self.part)
    }

    /// As stored.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// From storage; `None` for a row without a plan or one this version cannot read.
    pub fn from_value(v: Option<&Value>) -> Option<Plan> {
        let plan: Plan = v.and_then(|v| serde_json::from_value(v.clone()).ok())?;
        // A plan is stored only by `plans` and advanced only by `next_part` and `fallback`.
        let broken = crate::never!(
            plan.current().is_none(),
            "a stored plan points at part {} of alternative {} of {}",
            plan.part,
            plan.alt,
            plan.alternatives.len()
        );
        (!broken).then_some(plan)
    }
}

/// Where a text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Chat.
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// The message the first piece replies to.
    pub reply_to: Option<i64>,
}

impl Target {
    fn base(&self, first: bool) -> Value {
        let mut p = json!({ "chat_id": self.chat_id });
        if let Some(t) = self.thread_id {
            p["message_thread_id"] = json!(t);
        }
        if let (true, Some(m)) = (first, self.reply_to) {
            p["reply_parameters"] = json!({ "message_id": m, "allow_sending_without_reply": true });
        }
        p
    }
}

/// The plans of a Markdown text: one per piece, in order.
pub fn plans(markdown: &str, rendering: Rendering, target: &Target) -> Vec<Plan> {
    match rendering {
        Rendering::Rich => markdown::render_rich(markdown, TEXT_PIECE, &RichBudget::default())
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                let first = i == 0;
                let mut rich = target.base(first);
                rich["rich_message"] =
                    json!({ "markdown": piece.markdown, "skip_entity_detection": true });
                let (html, plain) = text_messages(&piece.fallback, target, first);
                Plan {
                    alternatives: vec![
                        Alternative {
                            name: "rich".into(),
                            method: "sendRichMessage".into(),
                            messages: vec![rich],
                        },
                        html,
                        plain,
                    ],
                    alt: 0,
                    part: 0,
                    repeat: None,
                }
            })
            .collect(),
        Rendering::Html => markdown::render_html(markdown, TEXT_PIECE)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                let (html, plain) = text_messages(std::slice::from_ref(&piece), target, i == 0);
                Plan {
                    alternatives: vec![html, plain],
                    alt: 0,
                    part: 0,
                    repeat: None,
                }
            })
            .collect(),
    }
}

/// HTML messages and their plain-text twins.
fn text_messages(
    pieces: &[markdown::TextPiece],
    target: &Target,
    first: bool,
) -> (Alternative, Alternative) {
    let mut html = Vec::with_capacity(pieces.len());
    let mut plain = Vec::with_capacity(pieces.len());
    for (i, p) in pieces.iter().enumerate() {
        let base = target.base(first && i == 0);
        let mut h = base.clone();
        h["text"] = json!(p.html);
        h["parse_mode"] = json!("HTML");
        h["link_preview_options"] = json!({ "is_disabled": true });
        html.push(h);
        let mut t = base;
        t["text"] = json!(p.plain);
        t["link_preview_options"] = json!({ "is_disabled": true });
        plain.push(t);
    }
    (
        Alternative {
            name: "html".into(),
            method: "sendMessage".into(),
            messages: html,
        },
        Alternative {
            name: "plain".into(),
            method: "sendMessage".into(),
            messages: plain,
        },
    )
}

/// Text the bot writes itself, made safe to put into Markdown: every ASCII punctuation
/// character escaped, so it shows exactly as written.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Target = Target {
        chat_id: 5,
        thread_id: Some(9),
        reply_to: Some(3),
    };

    #[test]
    fn a_rich_piece_falls_back_to_its_html_pieces_then_plain_text() {
        let long = format!("# Title\n\n{}", "a sentence of words. ".repeat(400));
        let plans = plans(&long, Rendering::Rich, &TARGET);
        assert_eq!(plans.len(), 1, "8,000 characters are one rich message");
        let p = &plans[0];
        let (method, params) = p.current().unwrap_or(("", &Value::Null));
        assert_eq!(method, "sendRichMessage");
        assert_eq!(params["reply_parameters"]["message_id"], json!(3));
        assert_eq!(params["message_thread_id"], json!(9));
        // Refused: its HTML pieces, sent one after another, the first one replying.
        let html = p.fallback().unwrap_or_else(|| p.clone());
        assert_eq!(html.name(), "html");
        assert!(html.alternatives[1].messages.len() >= 2);
        assert_eq!(html.part, 0);
        assert!(
            html.current()
                .is_some_and(|(_, p)| p.get("reply_parameters").is_some())
        );
        let second = html.next_part().unwrap_or_else(|| html.clone());
        assert!(
            second
                .current()
                .is_some_and(|(_, p)| p.get("reply_parameters").is_none())
        );
        // HTML refused at its second message: plain text from that same message on.
        let plain = second.fallback().unwrap_or_else(|| second.clone());
        assert_eq!((plain.name(), plain.part), ("plain", 1));
        assert!(plain.fallback().is_none(), "nothing after plain text");
    }

    #[test]
    fn html_rendering_has_a_plain_twin_per_piece() {
        let plans = plans("**x** and <y>", Rendering::Html, &TARGET);
        assert_eq!(plans.len(), 1);
        let (m, p) = plans[0].current().unwrap_or(("", &Value::Null));
        assert_eq!(m, "sendMessage");
        assert_eq!(p["text"], json!("<b>x</b> and &lt;y&gt;"));
        let plain = plans[0].fallback().unwrap_or_else(|| plans[0].clone());
        assert_eq!(
            plain.current().map(|(_, p)| p["text"].clone()),
            Some(json!("x and <y>"))
        );
        let stored = Plan::from_value(Some(&plans[0].to_value()));
        assert_eq!(stored.as_ref(), Some(&plans[0]));
    }

    #[test]
    fn bot_text_is_shown_as_written() {
        let md = escape_markdown("[web] *not bold* $5 <b>");
        let plain = markdown::render_html(&md, TEXT_PIECE);
        assert_eq!(plain[0].plain, "[web] *not bold* $5 <b>");
    }
}
