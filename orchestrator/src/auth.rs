//! Per-instance tokens: who may call what on the control plane.
//!
//! The orchestrator makes one random token per role instance when a campaign
//! starts and hands each step its own in the environment (`HPCAGENT_TOKEN`):
//! never on a command line, never in a file others can read. A token names
//! its instance, so a caller can act only as itself: heartbeat for itself,
//! renew and complete its own leases, record verdicts for leases it judges.
//! `hpcagent status` uses the observer token from the run directory's
//! `orchestrator.json` (mode 0600).
//!
//! Judges serve agents, not the orchestrator: their gRPC service takes one
//! more token of the campaign ([`Tokens::judge_access`], `HPCAGENT_JUDGE_TOKEN`),
//! which agents and judges get and nobody else does.
//!
//! A module of its own: the campaign makes the tokens and hands them out,
//! the running campaign ([`crate::live`]) holds them, the control plane
//! ([`crate::control`]) checks them.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use tonic::{Request, Status};

use hpcagent_common::plan::Role;
use hpcagent_common::{bearer, constant_time_eq};

/// Who a caller is, as its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// One role instance of the plan.
    Instance { role: Role, name: String },
    /// Read-only: `hpcagent status`.
    Observer,
}

impl Principal {
    pub fn role(&self) -> Option<Role> {
        match self {
            Principal::Instance { role, .. } => Some(*role),
            Principal::Observer => None,
        }
    }

    /// The instance name, "" for an observer.
    pub fn name(&self) -> &str {
        match self {
            Principal::Instance { name, .. } => name,
            Principal::Observer => "",
        }
    }

    /// Refuses the call unless the caller is `instance`.
    pub fn must_be(&self, instance: &str, what: &str) -> Result<(), Status> {
        if self.name() == instance {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "{} may not {what} for {instance}",
                self.describe()
            )))
        }
    }

    fn describe(&self) -> String {
        match self {
            Principal::Instance { name, .. } => name.clone(),
            Principal::Observer => "an observer".into(),
        }
    }
}

/// The campaign's tokens.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// (token, instance, role) per role instance.
    instances: Vec<(String, String, Role)>,
    /// Index into `instances` by the SHA-256 of the token: a lookup costs
    /// the same with 10 instances or 10,000, and its timing follows a digest
    /// of what the caller presented, which says nothing about the tokens.
    by_digest: HashMap<[u8; 32], usize>,
    pub observer: String,
    /// What the campaign's judges accept from agents.
    pub judge_access: String,
}

fn token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

impl Tokens {
    /// One token per instance of `instances` (name, role), and the shared ones.
    pub fn generate<'a>(instances: impl IntoIterator<Item = (&'a str, Role)>) -> Tokens {
        let instances: Vec<(String, String, Role)> = instances
            .into_iter()
            .map(|(name, role)| (token(), name.to_string(), role))
            .collect();
        let by_digest = instances
            .iter()
            .enumerate()
            .map(|(i, (token, ..))| (digest(token), i))
            .collect();
        Tokens {
            instances,
            by_digest,
            observer: token(),
            judge_access: token(),
        }
    }

    /// The token of `instance`.
    pub fn of(&self, instance: &str) -> Option<&str> {
        self.instances
            .iter()
            .find(|(_, name, _)| name == instance)
            .map(|(token, ..)| token.as_str())
    }

    /// The principal a presented token belongs to. Tokens are found by
    /// digest and then compared in constant time, so timing tells nothing
    /// about which one came close.
    pub fn principal(&self, presented: &str) -> Option<Principal> {
        if constant_time_eq(self.observer.as_bytes(), presented.as_bytes()) {
            return Some(Principal::Observer);
        }
        let (token, name, role) = &self.instances[*self.by_digest.get(&digest(presented))?];
        constant_time_eq(token.as_bytes(), presented.as_bytes()).then(|| Principal::Instance {
            role: *role,
            name: name.clone(),
        })
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Checks the bearer token and attaches the caller's [`Principal`] to the request.
pub fn interceptor(
    tokens: Tokens,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    // The router clones the service, and so this closure, for every request:
    // shared, the tokens of a thousand instances are not copied each time.
    let tokens = std::sync::Arc::new(tokens);
    move |mut request: Request<()>| {
        let presented = bearer(&request).ok_or_else(|| {
            Status::unauthenticated("no role token (authorization: Bearer <token>)")
        })?;
        let principal = tokens
            .principal(presented)
            .ok_or_else(|| Status::unauthenticated("unknown role token"))?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }
}

/// Refuses the call unless the caller has one of the `allowed` roles
/// (`None`: an observer).
pub fn require<T>(
    request: &Request<T>,
    allowed: &[Option<Role>],
    what: &str,
) -> Result<Principal, Status> {
    let principal = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no role token"))?;
    if allowed.contains(&principal.role()) {
        Ok(principal)
    } else {
        Err(Status::permission_denied(format!(
            "{} may not call {what}",
            principal.describe()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_identify_their_instance_only() {
        let t = Tokens::generate([("judge-0", Role::Judge), ("agent-0", Role::Agent)]);
        let judge = t.of("judge-0").unwrap();
        assert_eq!(
            t.principal(judge),
            Some(Principal::Instance {
                role: Role::Judge,
                name: "judge-0".into()
            })
        );
        assert_eq!(
            t.principal(t.of("agent-0").unwrap()).unwrap().name(),
            "agent-0"
        );
        assert_eq!(t.principal(&t.observer), Some(Principal::Observer));
        assert_eq!(
            t.principal(&t.judge_access),
            None,
            "not a control-plane token"
        );
        assert_eq!(t.principal("guess"), None);
        assert_eq!(t.principal(""), None);
        assert_ne!(t.of("agent-0"), t.of("judge-0"));
    }

    #[test]
    fn an_instance_acts_only_as_itself() {
        let p = Principal::Instance {
            role: Role::Agent,
            name: "agent-0".into(),
        };
        assert!(p.must_be("agent-0", "pull").is_ok());
        let refused = p.must_be("agent-1", "pull").unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    }
}
