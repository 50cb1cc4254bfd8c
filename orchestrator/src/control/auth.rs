//! Per-run role tokens: who may call what on the control plane.
//!
//! The orchestrator makes one random token per role when a campaign starts
//! and hands each step its role's token in the environment
//! (`HPCAGENT_TOKEN`): never on a command line, never in a file others can
//! read. `hpcagent status` uses the status token from the run directory's
//! `orchestrator.json` (mode 0600).

use tonic::{Request, Status};

/// Who a caller is, as its token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    Agent,
    Judge,
    Inference,
    /// Read-only: `hpcagent status`.
    Observer,
}

/// The campaign's tokens.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub agent: String,
    pub judge: String,
    pub inference: String,
    pub observer: String,
}

impl Tokens {
    pub fn generate() -> Tokens {
        let token = || format!("{:032x}", rand::random::<u128>());
        Tokens {
            agent: token(),
            judge: token(),
            inference: token(),
            observer: token(),
        }
    }

    /// The principal a presented token belongs to.
    pub fn principal(&self, presented: &str) -> Option<Principal> {
        [
            (&self.agent, Principal::Agent),
            (&self.judge, Principal::Judge),
            (&self.inference, Principal::Inference),
            (&self.observer, Principal::Observer),
        ]
        .into_iter()
        .find(|(token, _)| constant_time_eq(token.as_bytes(), presented.as_bytes()))
        .map(|(_, principal)| principal)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks the bearer token and attaches the caller's [`Principal`] to the request.
pub fn interceptor(
    tokens: Tokens,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("no role token (authorization: Bearer <token>)")
            })?;
        let principal = tokens
            .principal(presented)
            .ok_or_else(|| Status::unauthenticated("unknown role token"))?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }
}

/// Refuses the call unless the caller is one of `allowed`.
pub fn require<T>(
    request: &Request<T>,
    allowed: &[Principal],
    what: &str,
) -> Result<Principal, Status> {
    let principal = *request
        .extensions()
        .get::<Principal>()
        .ok_or_else(|| Status::unauthenticated("no role token"))?;
    if allowed.contains(&principal) {
        Ok(principal)
    } else {
        Err(Status::permission_denied(format!(
            "a {principal:?} token may not call {what}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_identify_their_role_only() {
        let t = Tokens::generate();
        assert_eq!(t.principal(&t.judge), Some(Principal::Judge));
        assert_eq!(t.principal(&t.agent), Some(Principal::Agent));
        assert_eq!(t.principal("guess"), None);
        assert_eq!(t.principal(""), None);
        assert_ne!(t.agent, t.judge);
    }
}
