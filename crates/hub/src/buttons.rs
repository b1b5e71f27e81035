//! What a hub button does. Telegram carries only an opaque token (`callbacks`); the action it
//! stands for is stored as JSON, so identities (folder paths, which may hold any character)
//! never have to be parsed back out of a string.

use serde::{Deserialize, Serialize};

/// A button's action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Button {
    /// `/start`: new messages go to this identity (classic mode).
    Select { identity: String },
    /// A waiting message goes to `to`: one that waits for the person's choice, or (with
    /// `instead_of`) one that waits for a pi that is away.
    Send {
        turn: i64,
        /// Where it goes.
        to: String,
        /// The identity it waited for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instead_of: Option<String>,
    },
    /// "Move X here": the identity lives in this topic from now on; the turn goes to it.
    Move {
        /// The turn written in the topic.
        turn: i64,
        identity: String,
        /// The topic.
        thread: i64,
    },
    /// Settle a topic creation of unknown outcome.
    Intent {
        /// The intent.
        id: i64,
        /// `true`: create a new thread; `false`: forget it.
        create: bool,
    },
    /// Open a section of the menu (edits the menu message).
    Menu {
        /// The instance it is about (`None`: pick one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<String>,
        section: Section,
    },
    /// Switch an instance's model.
    Model {
        /// The instance.
        identity: String,
        provider: String,
        /// Model id.
        id: String,
    },
    /// A page of an instance's model menu (edits the menu message); pi is asked for its
    /// models again, so the page shows what pi offers now.
    ModelPage {
        /// The instance.
        identity: String,
        /// Counted from 0.
        page: usize,
    },
    /// Another page of a long list (edits the message that shows it, as it is now).
    Page {
        /// Which list.
        of: Paged,
        /// Counted from 0; past the end shows the last page.
        page: usize,
    },
    /// Set an instance's thinking level.
    Thinking {
        /// The instance.
        identity: String,
        level: String,
    },
    /// Change a waiting turn.
    Queue {
        turn: i64,
        /// What to do.
        op: QueueOp,
    },
    /// Change an `assistant` setting in telegram.json.
    Setting {
        /// The key under `assistant`.
        key: String,
        /// The new value (a JSON string or boolean, as text).
        value: String,
    },
    /// Confirm a compaction.
    Compact {
        /// The instance.
        identity: String,
    },
    /// Close a question without doing anything.
    Dismiss,
    /// `/new`: start a headless pi in this folder (checked against the workspaces again).
    NewPi {
        /// The folder.
        cwd: String,
    },
    /// `/new`: a fresh session for this instance.
    NewSession {
        /// The instance.
        identity: String,
    },
    /// `/sessions`: resume this session file.
    Resume {
        /// The instance.
        identity: String,
        /// The session file.
        path: String,
    },
    /// A button pi put under a message (`telegram_button`): the tap sends `prompt` to the
    /// instance, and the button takes `style` to show it was chosen.
    Prompt {
        /// The instance.
        identity: String,
        /// What pi gets.
        prompt: String,
        /// `primary`, `success` or `danger`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        style: Option<String>,
    },
    /// The answer to a stale question ("these waited while pi was away: run them now?").
    Stale {
        /// The question.
        question: i64,
        /// `true`: run them; `false`: skip them.
        run: bool,
    },
    /// The answer to the offer to delete topics offline past `threadRetentionDays`.
    Retention {
        /// The topics offered, `(chat, thread)`.
        topics: Vec<(i64, i64)>,
        /// `true`: delete them; `false`: keep them.
        delete: bool,
    },
    /// Stop the turn pi works on (the working card's ⏹): an abort bound to that turn.
    Stop {
        /// The turn.
        turn: i64,
    },
    /// An answer to one of pi's dialogs (`store::dialogs`).
    Dialog {
        /// The dialog.
        dialog: i64,
        /// What the button answers.
        choice: DialogChoice,
    },
    /// The owner's answer to `/link` in a forum group: make it the workspace, or not.
    LinkGroup {
        /// The group's chat.
        chat: i64,
        /// Its title when asked.
        title: String,
        /// `true`: link it.
        link: bool,
    },
    /// `/people`: a one-time code that lets someone in with this role.
    Invite {
        /// What they may do.
        role: store::people::Role,
    },
    /// `/people`: this person may no longer use the bot.
    RemovePerson {
        /// Their user id.
        user: i64,
        /// The page of `/people` it is on (shown again after).
        #[serde(default, skip_serializing_if = "is_zero")]
        page: usize,
    },
    /// `/people`: this invite's code no longer works.
    RevokeInvite {
        /// The invite.
        invite: i64,
        /// The page of `/people` it is on.
        #[serde(default, skip_serializing_if = "is_zero")]
        page: usize,
    },
    /// A button of a question that was settled: it only says how (a double tap, data sent
    /// again). The settling tap rewrites every button of the question into this.
    Settled {
        /// What a tap on it is told.
        answer: String,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A list shown a page at a time: what it needs to be shown again at another page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "list", rename_all = "snake_case")]
pub enum Paged {
    /// The main menu's instances (`/start`), the menu being about `identity`.
    Main {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<String>,
    },
    /// The Instances section.
    Instances,
    /// An instance's waiting prompts.
    Queue { identity: String },
    /// An instance's saved sessions (`/sessions`; pi is asked for them again).
    Sessions { identity: String },
    /// `/new`'s folders (looked up again per page).
    Folders,
    /// `/people`'s people.
    People,
    /// The live pi a waiting turn may be sent to; `instead_of`: the one it waits for.
    Chooser {
        turn: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instead_of: Option<String>,
    },
}

/// What a button of a dialog's question answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DialogChoice {
    /// The option at this place of a select's list.
    Option(usize),
    /// A confirm's yes.
    Yes,
    /// A confirm's no.
    No,
    /// Dismiss the dialog (pi reads it as cancelled).
    Cancel,
}

/// A section of the menu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// The overview with the section buttons.
    Main,
    /// Instance, folder, model, thinking, busy/idle, queue, context, cost.
    Status,
    /// The models to switch to.
    Model,
    /// The thinking levels.
    Thinking,
    /// The waiting prompts.
    Queue,
    /// The `assistant` settings.
    Settings,
    /// The instances (switch, or their topics).
    Instances,
    /// What the bot does and its commands.
    Help,
}

impl Section {
    /// From a command name (`/model` opens the model section).
    pub fn of_command(name: &str) -> Option<Section> {
        Some(match name {
            "start" => Self::Main,
            "status" => Self::Status,
            "model" => Self::Model,
            "thinking" => Self::Thinking,
            "queue" => Self::Queue,
            "settings" => Self::Settings,
            "help" => Self::Help,
            _ => return None,
        })
    }

    /// The name on its button.
    pub fn title(self) -> &'static str {
        match self {
            Self::Main => "Menu",
            Self::Status => "Status",
            Self::Model => "Model",
            Self::Thinking => "Thinking",
            Self::Queue => "Queue",
            Self::Settings => "Settings",
            Self::Instances => "Instances",
            Self::Help => "Help",
        }
    }
}

/// What a queue button does to a waiting turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueOp {
    /// To the tail of the priority lane.
    Priority,
    /// To the tail of the normal lane.
    Normal,
    /// Dropped when dispatch reaches it.
    Skip,
    /// Not skipped any more.
    Keep,
    /// Removed now.
    Remove,
}

impl Button {
    /// The stored form.
    pub fn encode(&self) -> String {
        // A plain enum of strings and numbers always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a stored action; also the colon form of earlier versions, so buttons sent before
    /// an upgrade keep working. `None` for anything else.
    pub fn decode(stored: &str) -> Option<Self> {
        if let Ok(b) = serde_json::from_str(stored) {
            return Some(b);
        }
        let (head, rest) = stored.split_once(':')?;
        match head {
            "select" => Some(Self::Select {
                identity: rest.to_owned(),
            }),
            "send" => {
                let (turn, to) = rest.split_once(':')?;
                Some(Self::Send {
                    turn: turn.parse().ok()?,
                    to: to.to_owned(),
                    instead_of: None,
                })
            }
            "move" => {
                let (turn, rest) = rest.split_once(':')?;
                let (identity, thread) = rest.rsplit_once(':')?;
                Some(Self::Move {
                    turn: turn.parse().ok()?,
                    identity: identity.to_owned(),
                    thread: thread.parse().ok()?,
                })
            }
            "intent" => {
                let (choice, id) = rest.split_once(':')?;
                Some(Self::Intent {
                    id: id.parse().ok()?,
                    create: choice == "create",
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_round_trip_whatever_the_identity_holds() {
        let all = [
            Button::Select {
                identity: "/home/me/a:b#2".into(),
            },
            Button::Send {
                turn: 7,
                to: "/x:y".into(),
                instead_of: Some("/z".into()),
            },
            Button::Send {
                turn: 8,
                to: "/x".into(),
                instead_of: None,
            },
            Button::Move {
                turn: 1,
                identity: "/w:1".into(),
                thread: 99,
            },
            Button::Intent {
                id: 3,
                create: false,
            },
            Button::Stale {
                question: 2,
                run: true,
            },
            Button::Dialog {
                dialog: 4,
                choice: DialogChoice::Option(2),
            },
            Button::Dialog {
                dialog: 4,
                choice: DialogChoice::Cancel,
            },
            Button::Stop { turn: 9 },
            Button::Menu {
                identity: Some("/a".into()),
                section: Section::Queue,
            },
            Button::Queue {
                turn: 4,
                op: QueueOp::Skip,
            },
            Button::Model {
                identity: "/a".into(),
                provider: "p".into(),
                id: "m:1".into(),
            },
            Button::ModelPage {
                identity: "/a".into(),
                page: 3,
            },
            Button::Page {
                of: Paged::Main { identity: None },
                page: 2,
            },
            Button::Page {
                of: Paged::Instances,
                page: 0,
            },
            Button::Page {
                of: Paged::Queue {
                    identity: "/a:b".into(),
                },
                page: 1,
            },
            Button::Page {
                of: Paged::Sessions {
                    identity: "/a".into(),
                },
                page: 4,
            },
            Button::Page {
                of: Paged::Folders,
                page: 12,
            },
            Button::Page {
                of: Paged::People,
                page: 3,
            },
            Button::RemovePerson { user: 7, page: 0 },
            Button::RevokeInvite { invite: 2, page: 5 },
            Button::Page {
                of: Paged::Chooser {
                    turn: 5,
                    instead_of: Some("/z".into()),
                },
                page: 24,
            },
        ];
        for b in all {
            assert_eq!(Button::decode(&b.encode()), Some(b));
        }
    }

    #[test]
    fn buttons_from_before_the_upgrade_still_work() {
        assert_eq!(
            Button::decode("send:12:/home/me/web"),
            Some(Button::Send {
                turn: 12,
                to: "/home/me/web".into(),
                instead_of: None
            })
        );
        assert_eq!(
            Button::decode("move:3:/p:q:41"),
            Some(Button::Move {
                turn: 3,
                identity: "/p:q".into(),
                thread: 41
            })
        );
        assert_eq!(
            Button::decode("intent:create:5"),
            Some(Button::Intent {
                id: 5,
                create: true
            })
        );
        assert_eq!(Button::decode("nonsense"), None);
        assert_eq!(Button::decode("send:x:/p"), None);
    }
}
