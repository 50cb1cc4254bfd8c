//! A pool of interchangeable endpoints: the campaign's judges, or its
//! inference replicas. It knows which are usable and how many active leases
//! each carries; the scheduler picks the least loaded usable one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long an endpoint reported as failing gets no leases (unless it
/// registers again: a restarted role is a new process).
pub const SET_ASIDE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default)]
struct Member {
    url: String,
    ready: bool,
    load: u32,
    set_aside_until: Option<Instant>,
}

impl Member {
    fn usable(&self, now: Instant) -> bool {
        self.ready && self.set_aside_until.is_none_or(|t| now >= t)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Pool {
    members: BTreeMap<String, Member>,
}

impl Pool {
    /// An endpoint (re)registered: a new process, trusted afresh, not ready yet.
    pub fn registered(&mut self, instance: &str, url: &str) {
        let member = self.members.entry(instance.to_string()).or_default();
        member.url = url.to_string();
        member.ready = false;
        member.set_aside_until = None;
    }

    /// An endpoint reported whether it is ready.
    pub fn ready(&mut self, instance: &str, ready: bool) {
        if let Some(member) = self.members.get_mut(instance) {
            member.ready = ready;
        }
    }

    /// An endpoint is gone (its step died or stopped heartbeating).
    pub fn down(&mut self, instance: &str) {
        self.ready(instance, false);
    }

    pub fn usable(&self, instance: &str, now: Instant) -> bool {
        self.members.get(instance).is_some_and(|m| m.usable(now))
    }

    pub fn url(&self, instance: &str) -> Option<&str> {
        self.members.get(instance).map(|m| m.url.as_str())
    }

    /// The URLs of the usable endpoints other than `instance`'s.
    pub fn others(&self, instance: &str, now: Instant) -> Vec<String> {
        self.members
            .iter()
            .filter(|(name, m)| name.as_str() != instance && m.usable(now))
            .map(|(_, m)| m.url.clone())
            .collect()
    }

    /// The least loaded usable endpoint.
    pub fn pick(&self, now: Instant) -> Option<String> {
        self.members
            .iter()
            .filter(|(_, m)| m.usable(now))
            .min_by_key(|(name, m)| (m.load, (*name).clone()))
            .map(|(name, _)| name.clone())
    }

    /// Counts one more lease on `instance`; returns its URL.
    pub(super) fn acquire(&mut self, instance: &str) -> String {
        let member = self
            .members
            .get_mut(instance)
            .expect("a member of the pool");
        member.load += 1;
        member.url.clone()
    }

    pub(super) fn release(&mut self, instance: &str) {
        if let Some(member) = self.members.get_mut(instance) {
            member.load = member.load.saturating_sub(1);
        }
    }

    /// Sets a usable endpoint aside for [`SET_ASIDE`] (one already unusable
    /// stays as it is: a repeated report must not extend it).
    pub(super) fn set_aside(&mut self, instance: &str, now: Instant) {
        if let Some(member) = self.members.get_mut(instance)
            && member.usable(now)
        {
            member.set_aside_until = Some(now + SET_ASIDE);
        }
    }
}
