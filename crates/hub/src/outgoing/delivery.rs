//! Rendered text on its way out: an outbox row per piece, each with a [`Plan`] of the messages
//! ([`Outgoing`]) it is sent as; every outbox row has one, a single message being a plan of one.
//! Alternatives are tried in order when Telegram refuses one (rich, then HTML, then plain text), so
//! a formatting problem never loses a word; a piece that is one rich message may be several text
//! messages, sent one after another from the same row, so the conversation's order holds whatever
//! happens.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tg_format::markdown::{self, RichBudget};

use crate::assistant::Rendering;
use crate::outgoing::message::{LinkPreview, Outgoing, ParseMode, Rich, RichMessage, Spot, Text};

/// Text messages are cut this far below Telegram's 4096 so a label or a repeat mark fits.
pub const TEXT_PIECE: usize = 4000;

/// How one outbox row is delivered: what the outbox stores of it (its `delivery`).
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

/// One way to deliver a row: messages sent in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    /// `rich`, `html`, `plain`, `voice`, or `message` for a row of one message, for incidents.
    pub name: String,
    pub messages: Vec<Outgoing>,
}

impl Plan {
    /// A row that sends one message.
    pub fn single(message: Outgoing) -> Plan {
        Plan::of(vec![Alternative {
            name: "message".into(),
            messages: vec![message],
        }])
    }

    /// A plan that starts at the first message of the first of `alternatives`.
    pub fn of(alternatives: Vec<Alternative>) -> Plan {
        Plan {
            alternatives,
            alt: 0,
            part: 0,
            repeat: None,
        }
    }

    /// The message to send now.
    pub fn current(&self) -> Option<&Outgoing> {
        self.alternatives.get(self.alt)?.messages.get(self.part)
    }

    /// The message to send now, to change it (the voice task puts in the voice it made).
    pub fn current_mut(&mut self) -> Option<&mut Outgoing> {
        self.alternatives
            .get_mut(self.alt)?
            .messages
            .get_mut(self.part)
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

    /// This plan with its current message addressed where its row is now (see
    /// [`Outgoing::placed`]): what the sender stores when it moves on to that message.
    pub fn placed(mut self, chat: i64, thread: Option<i64>) -> Plan {
        if let Some(m) = self.current_mut() {
            *m = m.placed(chat, thread);
        }
        self
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

    /// From storage; `None` for one this version cannot read.
    pub fn from_value(v: &Value) -> Option<Plan> {
        let plan = Plan::deserialize(v).ok()?;
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
    pub chat_id: i64,
    /// Topic.
    pub thread_id: Option<i64>,
    /// The message the first piece replies to.
    pub reply_to: Option<i64>,
}

impl Target {
    fn spot(&self, first: bool) -> Spot {
        Spot::new(
            self.chat_id,
            self.thread_id,
            self.reply_to.filter(|_| first),
        )
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
                let rich = Outgoing::Rich(Rich {
                    spot: target.spot(first),
                    rich_message: RichMessage {
                        markdown: piece.markdown,
                        skip_entity_detection: true,
                    },
                    reply_markup: None,
                });
                let (html, plain) = text_messages(&piece.fallback, target, first);
                Plan::of(vec![
                    Alternative {
                        name: "rich".into(),
                        messages: vec![rich],
                    },
                    html,
                    plain,
                ])
            })
            .collect(),
        Rendering::Html => markdown::render_html(markdown, TEXT_PIECE)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                let (html, plain) = text_messages(std::slice::from_ref(&piece), target, i == 0);
                Plan::of(vec![html, plain])
            })
            .collect(),
    }
}

/// A text without link previews (answers and the hub's HTML have none), HTML or plain.
pub fn text_message(spot: Spot, text: String, html: bool) -> Outgoing {
    Outgoing::Text(Text {
        spot,
        text,
        parse_mode: html.then_some(ParseMode::Html),
        entities: Vec::new(),
        link_preview_options: Some(LinkPreview::NONE),
        reply_markup: None,
    })
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
        let spot = target.spot(first && i == 0);
        html.push(text_message(spot.clone(), p.html.clone(), true));
        plain.push(text_message(spot, p.plain.clone(), false));
    }
    (
        Alternative {
            name: "html".into(),
            messages: html,
        },
        Alternative {
            name: "plain".into(),
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

    fn spot(p: &Plan) -> Option<Spot> {
        p.current().and_then(Outgoing::spot).cloned()
    }

    #[test]
    fn a_rich_piece_falls_back_to_its_html_pieces_then_plain_text() {
        let long = format!("# Title\n\n{}", "a sentence of words. ".repeat(400));
        let plans = plans(&long, Rendering::Rich, &TARGET);
        assert_eq!(plans.len(), 1, "8,000 characters are one rich message");
        let p = &plans[0];
        assert_eq!(p.current().map(Outgoing::method), Some("sendRichMessage"));
        let s = spot(p).unwrap_or_else(|| Spot::new(0, None, None));
        assert_eq!(s.reply_parameters.map(|r| r.message_id), Some(3));
        assert_eq!(s.message_thread_id, Some(9));
        // Refused: its HTML pieces, sent one after another, the first one replying.
        let html = p.fallback().unwrap_or_else(|| p.clone());
        assert_eq!(html.name(), "html");
        assert!(html.alternatives[1].messages.len() >= 2);
        assert_eq!(html.part, 0);
        assert!(spot(&html).is_some_and(|s| s.reply_parameters.is_some()));
        let second = html.next_part().unwrap_or_else(|| html.clone());
        assert!(spot(&second).is_some_and(|s| s.reply_parameters.is_none()));
        // HTML refused at its second message: plain text from that same message on.
        let plain = second.fallback().unwrap_or_else(|| second.clone());
        assert_eq!((plain.name(), plain.part), ("plain", 1));
        assert!(plain.fallback().is_none(), "nothing after plain text");
    }

    #[test]
    fn html_rendering_has_a_plain_twin_per_piece() {
        let plans = plans("**x** and <y>", Rendering::Html, &TARGET);
        assert_eq!(plans.len(), 1);
        let text = |p: &Plan| match p.current() {
            Some(Outgoing::Text(t)) => Some((t.text.clone(), t.parse_mode)),
            _ => None,
        };
        assert_eq!(
            text(&plans[0]),
            Some(("<b>x</b> and &lt;y&gt;".into(), Some(ParseMode::Html)))
        );
        let plain = plans[0].fallback().unwrap_or_else(|| plans[0].clone());
        assert_eq!(text(&plain), Some(("x and <y>".into(), None)));
        let stored = Plan::from_value(&plans[0].to_value());
        assert_eq!(stored.as_ref(), Some(&plans[0]));
    }

    #[test]
    fn bot_text_is_shown_as_written() {
        let md = escape_markdown("[web] *not bold* $5 <b>");
        let plain = markdown::render_html(&md, TEXT_PIECE);
        assert_eq!(plain[0].plain, "[web] *not bold* $5 <b>");
    }
}
