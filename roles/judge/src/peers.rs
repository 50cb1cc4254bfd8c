//! The other judges this one may ask to confirm a speedup above its task's
//! plausible bound ([`crate::grade`]'s confirmation): a campaign's judges
//! as the orchestrator last listed them (its heartbeat replies), or those
//! an operator named (`judge serve --peer`). It does not decide when to ask.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hpcagent_common::Bearer;
use hpcagent_proto::v1 as pb;

use crate::verdict::Verdict;

/// How long a peer may take over a confirming grade (a grade at L times
/// for minutes).
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(1800);

/// Where the list comes from.
type Source = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// The judges to ask, and the token they serve.
pub struct Peers {
    list: Source,
    token: Option<String>,
    next: AtomicUsize,
}

impl Peers {
    /// Nobody to ask.
    pub fn none() -> Peers {
        Peers::from_source(Arc::new(Vec::new), None)
    }

    /// The judges at `urls`, which ask for no token (standalone judges).
    pub fn fixed(urls: Vec<String>) -> Peers {
        Peers::from_source(Arc::new(move || urls.clone()), None)
    }

    /// The judges `list` gives when asked, which serve `token`.
    pub fn from_source(list: Source, token: Option<String>) -> Peers {
        Peers {
            list,
            token,
            next: AtomicUsize::new(0),
        }
    }

    /// The next judge to ask, in turn; `None` when there is none.
    pub fn pick(&self) -> Option<String> {
        let list = (self.list)();
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        list.get(turn % list.len().max(1)).cloned()
    }

    /// Asks the judge at `url` to grade `request` (a confirming Submit).
    pub async fn submit(&self, url: &str, request: pb::GradeRequest) -> Result<Verdict, String> {
        let asked = async {
            let channel = hpcagent_common::channel(url)
                .await
                .map_err(|e| format!("cannot reach it: {e}"))?;
            let bearer = match &self.token {
                Some(token) => Some(Bearer::new(token).map_err(|e| e.to_string())?),
                None => None,
            };
            let mut client = pb::judge_client::JudgeClient::with_interceptor(
                channel,
                move |mut r: tonic::Request<()>| {
                    if let Some(b) = &bearer {
                        r = tonic::service::Interceptor::call(&mut b.clone(), r)?;
                    }
                    Ok(r)
                },
            )
            .max_decoding_message_size(64 << 20);
            let verdict = client
                .submit(request)
                .await
                .map_err(|s| s.message().to_string())?;
            Ok(Verdict::from(verdict.into_inner()))
        };
        tokio::time::timeout(CONFIRM_TIMEOUT, asked)
            .await
            .unwrap_or_else(|_| Err(format!("no verdict within {CONFIRM_TIMEOUT:?}")))
    }
}
