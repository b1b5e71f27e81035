//! The built-in echo agent: an instance inside the hub that answers `echo: <prompt>`. It lets the
//! demo run on a machine without pi, and says clearly that it is not pi.

use tokio::sync::{mpsc, oneshot};
use wire::TurnResult;

use crate::pi::instance::{Attach, Command, ConductorMsg, GoneReason, LinkEvent, Transport};

/// Registers an echo agent "working" in `cwd`.
pub async fn start(
    conductor: mpsc::Sender<ConductorMsg>,
    cwd: String,
) -> Option<crate::pi::instance::InstanceId> {
    let (tx, mut rx) = mpsc::channel(super::COMMAND_QUEUE);
    let attach = Attach {
        transport: Transport::Echo,
        reach: crate::pi::instance::Reach::ThisMachine,
        pid: None,
        cwd,
        session_id: None,
        session_name: Some("echo agent".into()),
        session_file: None,
        idle: true,
        pending: false,
        received: Vec::new(),
        completed: Vec::new(),
        store_id: None,
        commands: tx,
        tools_token: None,
    };
    let (reply, id) = oneshot::channel();
    conductor
        .send(ConductorMsg::Attach(attach, reply))
        .await
        .ok()?;
    let id = id.await.ok()?;
    let me = id.clone();
    tokio::spawn(async move {
        while let Some(cmd) = rx.recv().await {
            let event = match cmd {
                Command::Prompt { turn, text, .. } => {
                    let _ = conductor
                        .send(ConductorMsg::Link(
                            me.clone(),
                            LinkEvent::Acked { turn: turn.clone() },
                        ))
                        .await;
                    LinkEvent::TurnDone(TurnResult {
                        turn_id: turn,
                        text: format!(
                            "echo: {text}\n\n(built-in echo agent, not pi: install pi to talk to a real one)"
                        ),
                        aborted: false,
                        error: None,
                        handled: false,
                    })
                }
                Command::Close(why) => LinkEvent::Gone(GoneReason::Closed(why)),
                // The echo agent has no model, session or commands of its own.
                Command::Request(request, answer) => {
                    let _ = answer.send(match request {
                        crate::pi::instance::Request::Stats => Ok(serde_json::json!({
                            "model": { "provider": "pi-telegram", "id": "echo" },
                        })),
                        crate::pi::instance::Request::Commands => {
                            Ok(serde_json::json!({ "commands": [] }))
                        }
                        _ => Err("the built-in echo agent is not pi: it has no models,                                   thinking levels or session to compact"
                            .into()),
                    });
                    continue;
                }
                _ => continue,
            };
            let gone = matches!(event, LinkEvent::Gone(_));
            if conductor
                .send(ConductorMsg::Link(me.clone(), event))
                .await
                .is_err()
                || gone
            {
                break;
            }
        }
    });
    Some(id)
}
