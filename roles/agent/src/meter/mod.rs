//! The model meter: an attempt's own door to its model's server, counting
//! the tokens each answer says it cost.
//!
//! An external CLI is handed the meter's loopback address as its model's
//! endpoint, and its sandbox lets it connect to the meter's port and not to
//! the model server's ([`crate::sandbox`]), so every model call it makes
//! passes here. Each request goes on as it came (but one change, below) to
//! the lease's inference endpoint, each answer back as it streams, read on
//! its way ([`tally`]). The attempt's tokens are then the model server's
//! own count, not the CLI's word about itself (the graded party may say
//! anything; [`crate::policy::usage`] is read only where no meter ran), nor
//! vLLM's counters (which every attempt of the campaign shares).
//!
//! A streamed chat or text completion states its usage only when asked
//! (`stream_options.include_usage`, in vLLM since 0.5): the meter asks on
//! a client's behalf and takes the chunk it added out of the stream, so
//! the client sees what it asked for.
//!
//! Each request's route, answer status and the tools it offered the model
//! go to the attempt's `model.jsonl` ([`offered`]).
//!
//! Owns no policy: what the CLI may do is its sandbox's; the meter neither
//! refuses nor rewrites what it forwards beyond that one field.

mod offered;
mod tally;

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use tally::{Shape, Tap};

/// The largest request body forwarded (a long conversation is a few MB).
const REQUEST_LIMIT: usize = 256 << 20;

type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A running meter; stopped when dropped, with every connection it took.
pub struct Meter {
    addr: SocketAddr,
    base_path: String,
    tokens: Arc<AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

/// Where requests go: the model server's origin.
#[derive(Clone)]
struct Upstream {
    origin: reqwest::Url,
    client: reqwest::Client,
    tokens: Arc<AtomicU64>,
    /// The attempt's `model.jsonl`: a line a request.
    requests: Arc<std::sync::Mutex<std::fs::File>>,
}

impl Meter {
    /// A meter on a new loopback port in front of `endpoint` (the lease's
    /// inference URL, `http://host:port/v1`), keeping a line a request in
    /// `requests` (the attempt's `model.jsonl`).
    pub async fn start(endpoint: &str, requests: &Path) -> Result<Meter, String> {
        let url = reqwest::Url::parse(endpoint)
            .map_err(|e| format!("the model endpoint {endpoint:?} is not a URL: {e}"))?;
        let mut origin = url.clone();
        origin.set_path("/");
        origin.set_query(None);
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("cannot make the meter's client: {e}"))?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot open the meter's port: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let tokens = Arc::new(AtomicU64::new(0));
        let requests = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(requests)
            .map_err(|e| format!("cannot open {}: {e}", requests.display()))?;
        let upstream = Upstream {
            origin,
            client,
            tokens: tokens.clone(),
            requests: Arc::new(std::sync::Mutex::new(requests)),
        };
        let accept = tokio::spawn(accept(listener, upstream));
        Ok(Meter {
            addr,
            base_path: url.path().trim_end_matches('/').to_string(),
            tokens,
            accept,
        })
    }

    /// The endpoint the CLI is given: the meter's address, with the model
    /// endpoint's path (`/v1`).
    pub fn endpoint(&self) -> String {
        format!("http://{}{}", self.addr, self.base_path)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The tokens of the answers that ended so far.
    pub fn tokens(&self) -> u64 {
        self.tokens.load(Ordering::Relaxed)
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept(listener: TcpListener, upstream: Upstream) {
    // Dropped with this task, the set aborts every connection.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let upstream = upstream.clone();
                    let service = hyper::service::service_fn(move |request| {
                        let upstream = upstream.clone();
                        async move { Ok::<_, Infallible>(forward(&upstream, request).await) }
                    });
                    connections.spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service),
                    );
                }
                Err(e) => {
                    tracing::warn!("the model meter cannot accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Sends one request on to the model server and its answer back, tapped.
async fn forward(upstream: &Upstream, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, REQUEST_LIMIT).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return refusal(StatusCode::BAD_REQUEST, format!("reading the request: {e}")),
    };
    let path = parts.uri.path();
    let offered = offered::tools(&body);
    let (body, strip) = tally::ask_for_usage(path, body);
    let mut url = upstream.origin.clone();
    url.set_path(path);
    url.set_query(parts.uri.query());
    let sent = upstream
        .client
        .request(parts.method, url)
        .headers(end_to_end(&parts.headers))
        .body(body)
        .send()
        .await;
    upstream.keep(
        path,
        sent.as_ref().ok().map(|a| a.status().as_u16()),
        &offered,
    );
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => {
            return refusal(
                StatusCode::BAD_GATEWAY,
                format!(
                    "the model server at {} did not answer: {e}",
                    upstream.origin
                ),
            );
        }
    };
    let shape = match answer.headers().get(header::CONTENT_TYPE) {
        Some(kind) if kind.as_bytes().starts_with(b"text/event-stream") => Shape::Events,
        _ => Shape::Document,
    };
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        *headers = end_to_end(answer.headers());
    }
    let tapped = Tapped {
        inner: Box::pin(answer.bytes_stream()),
        tap: Tap::new(shape, strip, upstream.tokens.clone()),
        done: false,
    };
    response
        .body(BodyExt::boxed_unsync(StreamBody::new(tapped)))
        .unwrap_or_else(|e| refusal(StatusCode::BAD_GATEWAY, e.to_string()))
}

impl Upstream {
    /// One request's line in `model.jsonl`: its route, the answer's status
    /// (none when the server did not answer) and the tools it offered.
    fn keep(&self, path: &str, status: Option<u16>, tools: &[String]) {
        let line = serde_json::json!({"path": path, "status": status, "tools": tools});
        let mut file = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writeln!(file, "{line}") {
            tracing::warn!("the model meter cannot keep its request log: {e}");
        }
    }
}

/// The headers that go on past the meter: not the connection's own, and
/// no length (what passes may be shorter, and goes chunked).
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    const HOP: &[header::HeaderName] = &[
        header::CONNECTION,
        header::CONTENT_LENGTH,
        header::HOST,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ];
    let mut kept = headers.clone();
    for name in HOP {
        kept.remove(name);
    }
    kept.remove("keep-alive");
    kept
}

fn refusal(status: StatusCode, why: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(why))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// An answer's bytes on their way to the client, through its [`Tap`].
struct Tapped {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    tap: Tap,
    done: bool,
}

impl Stream for Tapped {
    type Item = Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let passed = match ready!(this.inner.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => this.tap.pass(&chunk),
                Some(Err(e)) => return Poll::Ready(Some(Err(Box::new(e)))),
                None => {
                    this.done = true;
                    this.tap.finish()
                }
            };
            if !passed.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(passed))));
            }
        }
    }
}
