//! HTTP: the accept loop (with a per-connection kill switch for the drop faults) and the Bot
//! API request pipeline: auth, parameters, faults, strict checks, flood, method, log.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::api;
use crate::error::{ApiError, ApiResult, into_response};
use crate::faults::FaultKind;
use crate::flood::Scope;
use crate::log::RequestEntry;
use crate::params::{self, Params};
use crate::shared::Shared;
use crate::{api_lookup, api_spec};

/// Bodies above this are refused before parsing (uploads are limited to 50 MB).
const MAX_BODY: usize = 60 * 1024 * 1024;

/// Closes the connection a request arrived on, without an answer.
#[derive(Clone)]
pub struct ConnKill(Arc<Notify>);

impl ConnKill {
    async fn drop_connection(&self) -> Response {
        self.0.notify_one();
        // The connection task drops this future together with the connection.
        std::future::pending().await
    }
}

/// A request held forever, its connection open and silent (the `hang` fault): it ends only
/// when the client gives up and closes the connection (hyper then drops this future with it),
/// or when the fake stops.
async fn hang() -> Response {
    std::future::pending().await
}

/// `full` as far as half of its body, then the connection closed (the `reset_mid_body`
/// fault). The headers announce the whole body, so the client reads a body that ends early.
async fn cut_mid_body(kill: ConnKill, full: Response) -> Response {
    let (mut parts, body) = full.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_LENGTH,
        header::HeaderValue::from(bytes.len()),
    );
    let half = bytes.slice(..bytes.len() / 2);
    let stream = futures_util::stream::unfold(Some(half), move |left| {
        let kill = kill.clone();
        async move {
            match left {
                Some(half) => Some((Ok::<_, std::io::Error>(half), None)),
                None => {
                    // hyper flushes what it has while the body waits here; only then does the
                    // connection go, so the half is on the wire before the close.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    kill.0.notify_one();
                    std::future::pending().await
                }
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Serves `app` on `listener` (over TLS with `tls`) until `stop` changes.
pub async fn accept_loop(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        // Out of file descriptors and the like: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let kill = Arc::new(Notify::new());
                let svc = app.clone().layer(Extension(ConnKill(kill.clone())));
                let tls = tls.clone();
                conns.spawn(async move {
                    // The handshake in the connection's own task: a client that stalls in it
                    // holds up nobody else.
                    match tls {
                        None => serve_connection(stream, svc, kill).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(stream) => serve_connection(stream, svc, kill).await,
                            Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                        },
                    }
                });
            }
            _ = stop.changed() => break,
        }
        while conns.try_join_next().is_some() {}
    }
    conns.abort_all();
}

/// One connection, until it ends or a drop fault kills it.
async fn serve_connection<I>(io: I, svc: Router, kill: Arc<Notify>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(svc));
    tokio::select! {
        _ = conn => {}
        () = kill.notified() => {}
    }
}

/// Everything that is not a control route: `/bot<token>/<method>` and
/// `/file/bot<token>/<path>`. The `Date` header tells the fake clock's time, as Telegram's
/// tells its own: moving the clock (`POST /clock`) makes a client's clock look wrong.
pub async fn bot_api(
    State(shared): State<Arc<Shared>>,
    Extension(kill): Extension<ConnKill>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut resp = answer(&shared, kill, uri, headers, body).await;
    let now = std::time::UNIX_EPOCH + Duration::from_millis(shared.clock.now_ms());
    if let Ok(date) = httpdate::fmt_http_date(now).parse() {
        resp.headers_mut().insert(header::DATE, date);
    }
    resp
}

async fn answer(
    shared: &Arc<Shared>,
    kill: ConnKill,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let shared = shared.clone();
    let path = uri.path();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return download(&shared, kill, rest).await;
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|r| r.split_once('/')) else {
        return into_response(&Err(ApiError::not_found()));
    };
    let Some(bot) = shared.lock().bot_index(token) else {
        return into_response(&Err(ApiError::unauthorized()));
    };
    let params = match read_params(&uri, &headers, body).await {
        Ok(p) => p,
        Err(e) => return into_response(&Err(e)),
    };
    let Some(spec) = api_lookup::method(method) else {
        let err = Err(ApiError::not_found());
        log(&shared, bot, method, &params, Some(&err), None, false);
        return into_response(&err);
    };

    let plan = {
        let mut w = shared.lock();
        let crate::world::World { faults, rng, .. } = &mut *w;
        faults.plan(spec.name, || rng.next_f64())
    };
    if plan.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.delay_ms)).await;
    }
    // A delay alone is logged as the fault too: a test can see which request it held.
    let fault = plan
        .fault
        .map(|(k, _)| k)
        .or((plan.delay_ms > 0).then_some(FaultKind::Delay));
    let forced: Option<ApiResult> = match plan.fault {
        Some((FaultKind::Http500, _)) => Some(Err(ApiError::internal())),
        Some((FaultKind::ThreadNotFound, _)) => Some(Err(ApiError::thread_not_found())),
        Some((FaultKind::BadRequest, _)) => Some(Err(ApiError::bad_request(
            "can't parse entities: refused by an injected fault",
        ))),
        Some((FaultKind::Flood, secs)) => {
            let mut w = shared.lock();
            let now = w.clock.now_ms();
            let scope = params
                .int("chat_id")
                .ok()
                .flatten()
                .map_or(Scope::Global, Scope::Chat);
            w.bots[bot].flood.force(scope, secs, now);
            Some(Err(ApiError::flood(secs)))
        }
        Some((FaultKind::DropBefore, _)) => {
            log(&shared, bot, spec.name, &params, None, fault, false);
            return kill.drop_connection().await;
        }
        Some((FaultKind::Hang, _)) => {
            // Logged when it arrives: a test sees which requests are held.
            log(&shared, bot, spec.name, &params, None, fault, false);
            return hang().await;
        }
        _ => None,
    };
    if let Some(result) = forced {
        log(
            &shared,
            bot,
            spec.name,
            &params,
            Some(&result),
            fault,
            false,
        );
        return into_response(&result);
    }

    let result = run_method(&shared, bot, spec, &params).await;
    if fault == Some(FaultKind::CommitThenDrop) {
        shared.changes.send_modify(|n| *n += 1);
        log(&shared, bot, spec.name, &params, None, fault, true);
        return kill.drop_connection().await;
    }
    if fault == Some(FaultKind::ResetMidBody) {
        shared.changes.send_modify(|n| *n += 1);
        // `status` null: the client never read an answer.
        log(
            &shared,
            bot,
            spec.name,
            &params,
            None,
            fault,
            result.is_ok(),
        );
        return cut_mid_body(kill, into_response(&result)).await;
    }
    log(
        &shared,
        bot,
        spec.name,
        &params,
        Some(&result),
        fault,
        result.is_ok(),
    );
    if result.is_ok() && spec.name != "getUpdates" {
        shared.changes.send_modify(|n| *n += 1);
    }
    into_response(&result)
}

async fn run_method(
    shared: &Shared,
    bot: usize,
    spec: &'static api_spec::MethodSpec,
    params: &Params,
) -> ApiResult {
    {
        let mut w = shared.lock();
        if w.settings.strict {
            api::check_documented(spec, params)?;
        }
        api::check_required(spec, params)?;
        if api::is_draft(spec.name)
            && let Ok(Some(chat)) = params.int("chat_id")
        {
            let now = w.clock.now_ms();
            let cfg = w.settings.flood.clone();
            w.bots[bot]
                .flood
                .admit_draft(&cfg, chat, now)
                .map_err(ApiError::flood)?;
        }
        if api::counts_for_flood(spec.name) {
            let now = w.clock.now_ms();
            let chat = params.int("chat_id").ok().flatten();
            let cfg = w.settings.flood.clone();
            w.bots[bot]
                .flood
                .admit(&cfg, chat, now)
                .map_err(ApiError::flood)?;
        }
        if spec.name != "getUpdates" {
            return api::call(&mut w, bot, spec, params);
        }
    }
    api::updates::get_updates(shared, bot, params).await
}

fn log(
    shared: &Shared,
    bot: usize,
    method: &str,
    params: &Params,
    result: Option<&ApiResult>,
    fault: Option<FaultKind>,
    committed: bool,
) {
    let mut w = shared.lock();
    let entry = RequestEntry {
        seq: 0,
        at_ms: w.clock.now_ms(),
        at_us: w.clock.now_us(),
        bot_id: w.bots[bot].id,
        method: method.to_owned(),
        params: params.summary(),
        status: result.map(|r| r.as_ref().map_or_else(|e| e.code, |_| 200)),
        error: result.and_then(|r| r.as_ref().err().map(|e| e.description.clone())),
        fault: fault.and_then(|f| {
            serde_json::to_value(f)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        }),
        committed,
    };
    w.log.push(entry);
}

async fn read_params(uri: &Uri, headers: &HeaderMap, body: Body) -> Result<Params, ApiError> {
    let mut p = Params::default();
    if let Some(q) = uri.query() {
        params::add_urlencoded(&mut p, q.as_bytes());
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| ApiError {
            code: 413,
            description: "Request Entity Too Large".into(),
            parameters: None,
        })?;
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let outcome = if ctype.starts_with("application/json") {
        params::add_json(&mut p, &bytes)
    } else if ctype.starts_with("application/x-www-form-urlencoded") {
        params::add_urlencoded(&mut p, &bytes);
        Ok(())
    } else if ctype.starts_with("multipart/form-data") {
        let raw = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        match multer::parse_boundary(raw) {
            Ok(boundary) => params::add_multipart(&mut p, &boundary, bytes).await,
            Err(e) => Err(params::BodyError::Multipart(e.to_string())),
        }
    } else if bytes.is_empty() {
        Ok(())
    } else {
        // No usable content type: Telegram ignores such a body; so do we.
        Ok(())
    };
    outcome.map_err(|e| ApiError {
        code: 400,
        description: e.to_string(),
        parameters: None,
    })?;
    Ok(p)
}

/// A file download: through the fault rules named [`crate::faults::DOWNLOAD`] (a file server
/// fails like the API does: 500s, 429s, dropped connections, refusals), and logged as
/// `download` with its `file_path`.
async fn download(shared: &Shared, kill: ConnKill, rest: &str) -> Response {
    let Some((token, path)) = rest.split_once('/') else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let Some(bot) = shared.lock().bot_index(token) else {
        return into_response(&Err(ApiError::unauthorized()));
    };
    let mut params = Params::default();
    let query: String = url_encoded(&[("file_path", path)]);
    params::add_urlencoded(&mut params, query.as_bytes());
    let method = crate::faults::DOWNLOAD;
    let plan = {
        let mut w = shared.lock();
        let crate::world::World { faults, rng, .. } = &mut *w;
        faults.plan(method, || rng.next_f64())
    };
    if plan.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.delay_ms)).await;
    }
    // A delay alone is logged as the fault too: a test can see which request it held.
    let fault = plan
        .fault
        .map(|(k, _)| k)
        .or((plan.delay_ms > 0).then_some(FaultKind::Delay));
    let forced: Option<ApiResult> = match plan.fault {
        Some((FaultKind::Http500, _)) => Some(Err(ApiError::internal())),
        Some((FaultKind::ThreadNotFound, _)) => Some(Err(ApiError::thread_not_found())),
        Some((FaultKind::BadRequest, _)) => Some(Err(ApiError::bad_request(
            "can't parse entities: refused by an injected fault",
        ))),
        Some((FaultKind::Flood, secs)) => Some(Err(ApiError::flood(secs))),
        // A download changes nothing: dropping before or after reading the file is the same.
        Some((FaultKind::DropBefore | FaultKind::CommitThenDrop | FaultKind::ResetMidBody, _)) => {
            log(shared, bot, method, &params, None, fault, false);
            return kill.drop_connection().await;
        }
        Some((FaultKind::Hang, _)) => {
            log(shared, bot, method, &params, None, fault, false);
            return hang().await;
        }
        _ => None,
    };
    if let Some(result) = forced {
        log(shared, bot, method, &params, Some(&result), fault, false);
        return into_response(&result);
    }
    let bytes = {
        let w = shared.lock();
        api::media::download(&w, bot, path)
    };
    let result: ApiResult = match &bytes {
        Some(_) => Ok(serde_json::Value::Null),
        None => Err(ApiError::not_found()),
    };
    log(shared, bot, method, &params, Some(&result), fault, false);
    match bytes {
        Some(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        None => into_response(&result),
    }
}

/// `k=v&...` with the values percent-encoded.
fn url_encoded(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let enc: String = v
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            format!("{k}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}
