//! The CLI's side of the hub socket (`role: control`): ask a running hub to do something.

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use wire::{ClientMsg, Hello, HubMsg, InstanceState, LineReader, PROTOCOL, Role, encode};

use crate::error::HubError;
use crate::paths::ProfilePaths;

/// Sends one request and waits for its response's `data`.
pub async fn request(paths: &ProfilePaths, msg: ClientMsg, id: &str) -> Result<Value, HubError> {
    let not_running = |e: std::io::Error| {
        HubError::Usage(format!(
            "no hub is running for this profile ({e}): start one with `pi-telegram serve`"
        ))
    };
    let secret = crate::secret::read(&paths.secret()).map_err(not_running)?;
    let stream = UnixStream::connect(paths.socket())
        .await
        .map_err(not_running)?;
    let (rd, mut wr) = stream.into_split();
    let mut lines = LineReader::new(BufReader::new(rd));
    let hello = ClientMsg::Hello(Hello {
        protocol: PROTOCOL,
        role: Role::Control,
        secret,
        state: InstanceState::default(),
        received_turns: Vec::new(),
        completed_turns: Vec::new(),
        token: None,
        version: None,
        machine: None,
        store_id: None,
    });
    let io = HubError::io("talking to the hub");
    wr.write_all(encode(&hello).as_bytes()).await.map_err(io)?;
    wr.write_all(encode(&msg).as_bytes())
        .await
        .map_err(HubError::io("talking to the hub"))?;
    loop {
        let line = lines
            .next_line()
            .await
            .map_err(|e| HubError::Usage(format!("the hub's answer is unreadable: {e}")))?
            .ok_or_else(|| HubError::Usage("the hub closed the connection".into()))?;
        match serde_json::from_str::<HubMsg>(&line) {
            Ok(HubMsg::Refused { message, .. }) => {
                return Err(HubError::Usage(format!("the hub refused: {message}")));
            }
            Ok(HubMsg::Response {
                id: rid,
                ok,
                data,
                error,
            }) if rid == id => {
                return if ok {
                    Ok(data.unwrap_or(Value::Null))
                } else {
                    Err(HubError::Usage(error.unwrap_or_else(|| "failed".into())))
                };
            }
            _ => continue,
        }
    }
}
