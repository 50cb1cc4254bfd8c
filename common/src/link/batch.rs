//! A role's lease calls, batched: what an agent instance's workers (their
//! completions and pulls, one request on the instance's `Leases` stream)
//! and a judge's grades (their verdicts, one `RecordResults` call) ask of
//! the orchestrator one at a time goes out as few requests.
//!
//! A [`Coalescer`] keeps one call in flight and queues what is asked
//! meanwhile; the next call carries everything queued. On tokio's
//! multi-threaded runtime a task woken by a running task runs next, ahead of
//! those already queued: the coalescer, woken by the first of the workers
//! one reply released, would send that worker's request alone. So before a
//! call goes out it yields, until [`IDLE_YIELDS`] yields in a row bring no
//! new request (one can end early: every 61 polls tokio's pass over I/O and
//! timers wakes yielded tasks). A lone request goes out after those yields,
//! a busy node pays one call for many requests, and there is no timer to
//! tune. A refusal of the whole call reaches every request it carried; a
//! refused item only its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hpcagent_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tonic::{Code, Status};

use super::Client;

/// The most requests one call carries (the orchestrator takes up to
/// its `control::MAX_BATCH`).
const MAX_BATCH: usize = 256;

/// Yields in a row that must bring no new request before a call goes out.
/// Two left the workers of a busy agent instance that were woken a little
/// apart (by replies to different judges) in separate calls; four gather
/// most of them (more yields added little in `bench dispatch`, see
/// docs/benchmarks.md), with the same latency. An idle runtime answers a
/// yield at once, so a lone request waits for nothing.
const IDLE_YIELDS: u32 = 4;

type Answer<A> = oneshot::Sender<Result<A, Status>>;

/// Requests of type `I`, answered with `A`, sent in batches.
pub struct Coalescer<I, A> {
    queue: mpsc::UnboundedSender<(I, Answer<A>)>,
}

impl<I, A> Clone for Coalescer<I, A> {
    fn clone(&self) -> Self {
        Coalescer {
            queue: self.queue.clone(),
        }
    }
}

impl<I: Send + 'static, A: Send + 'static> Coalescer<I, A> {
    /// Sends batches with `call`, which answers each item of a batch, in
    /// order. The sending task ends when the last handle is dropped.
    pub fn new<F, Fut>(mut call: F) -> Coalescer<I, A>
    where
        F: FnMut(Vec<I>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Vec<Result<A, Status>>, Status>> + Send,
    {
        let (queue, mut queued) = mpsc::unbounded_channel::<(I, Answer<A>)>();
        tokio::spawn(async move {
            while let Some(first) = queued.recv().await {
                let mut batch = vec![first];
                let mut idle_yields = 0;
                while idle_yields < IDLE_YIELDS && batch.len() < MAX_BATCH {
                    tokio::task::yield_now().await;
                    let before = batch.len();
                    while batch.len() < MAX_BATCH {
                        match queued.try_recv() {
                            Ok(more) => batch.push(more),
                            Err(_) => break,
                        }
                    }
                    idle_yields = if batch.len() == before {
                        idle_yields + 1
                    } else {
                        0
                    };
                }
                let (items, answers): (Vec<I>, Vec<Answer<A>>) = batch.into_iter().unzip();
                let asked = items.len();
                match call(items).await {
                    Ok(results) if results.len() == asked => {
                        for (answer, result) in answers.into_iter().zip(results) {
                            let _ = answer.send(result);
                        }
                    }
                    Ok(results) => {
                        let wrong = Status::internal(format!(
                            "the orchestrator answered {} of {asked} requests",
                            results.len()
                        ));
                        answers
                            .into_iter()
                            .for_each(|a| drop(a.send(Err(wrong.clone()))));
                    }
                    Err(status) => {
                        answers
                            .into_iter()
                            .for_each(|a| drop(a.send(Err(status.clone()))));
                    }
                }
            }
        });
        Coalescer { queue }
    }

    /// Sends `item` with the next batch and waits for its answer.
    pub async fn call(&self, item: I) -> Result<A, Status> {
        let (answer, answered) = oneshot::channel();
        let gone = || Status::unavailable("the role's batching task has stopped");
        self.queue.send((item, answer)).map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }
}

/// A batch item's refusal as the status a lone call would have had.
fn refused(refusal: Option<pb::Refusal>) -> Result<(), Status> {
    match refusal {
        None => Ok(()),
        Some(r) => Err(Status::new(Code::from_i32(r.code), r.message)),
    }
}

/// What a worker's pull got.
#[derive(Debug, Clone, PartialEq)]
pub enum Pulled {
    Lease(Box<pb::Lease>),
    /// Nothing to do now: ask again after this long.
    Wait(Duration),
    /// Every task is settled or the campaign drains: stop pulling.
    Done,
}

/// What an agent worker asks of its instance's lease call.
enum Ask {
    Complete(pb::Completion),
    Pull(u32),
}

/// Its answer.
enum Told {
    Completed(bool),
    Pulled(Pulled),
}

/// An agent instance's lease calls, shared by its workers.
#[derive(Clone)]
pub struct Leases(Coalescer<Ask, Told>);

impl Leases {
    pub fn new(client: Client, instance: &str) -> Leases {
        let instance = instance.to_string();
        // The coalescer has one call in flight, so the lock is never
        // contended: it only hands the stream from call to call.
        let stream = Arc::new(tokio::sync::Mutex::new(LeaseStream { client, open: None }));
        Leases(Coalescer::new(move |asks: Vec<Ask>| {
            let mut request = pb::LeasesRequest {
                instance: instance.clone(),
                ..Default::default()
            };
            let pulling: Vec<bool> = asks.iter().map(|a| matches!(a, Ask::Pull(_))).collect();
            for ask in asks {
                match ask {
                    Ask::Complete(c) => request.completions.push(c),
                    Ask::Pull(worker) => request.pulls.push(worker),
                }
            }
            let stream = stream.clone();
            async move {
                let pulls = request.pulls.clone();
                let reply = stream.lock().await.exchange(request).await?;
                Ok(answer(&pulling, pulls, reply))
            }
        }))
    }

    /// The next lease of `worker`, or what to do without one.
    pub async fn pull(&self, worker: u32) -> Result<Pulled, Status> {
        match self.0.call(Ask::Pull(worker)).await? {
            Told::Pulled(pulled) => Ok(pulled),
            Told::Completed(_) => unreachable!("a pull is answered with what it pulled"),
        }
    }

    /// Ends the worker's lease; `true` when its task is settled.
    pub async fn complete(&self, completion: pb::Completion) -> Result<bool, Status> {
        match self.0.call(Ask::Complete(completion)).await? {
            Told::Completed(settled) => Ok(settled),
            Told::Pulled(_) => unreachable!("a completion is answered with its end"),
        }
    }
}

/// An agent instance's `Leases` stream: each request is answered by one
/// reply, in order. It is opened at the first exchange and again after one
/// fails (the orchestrator ends a stream with the status of a request it
/// refuses whole).
struct LeaseStream {
    client: Client,
    open: Option<Open>,
}

struct Open {
    asks: mpsc::Sender<pb::LeasesRequest>,
    replies: tonic::Streaming<pb::LeasesReply>,
}

impl LeaseStream {
    async fn exchange(&mut self, request: pb::LeasesRequest) -> Result<pb::LeasesReply, Status> {
        let result = self.send_and_receive(request).await;
        if result.is_err() {
            self.open = None;
        }
        result
    }

    async fn send_and_receive(
        &mut self,
        request: pb::LeasesRequest,
    ) -> Result<pb::LeasesReply, Status> {
        let closed = || Status::unavailable("the orchestrator ended the lease stream");
        let open = match &mut self.open {
            Some(open) => {
                open.asks.send(request).await.map_err(|_| closed())?;
                open
            }
            None => {
                // The first request waits in the channel while the stream opens.
                let (asks, queue) = mpsc::channel(1);
                asks.send(request).await.map_err(|_| closed())?;
                let replies = self
                    .client
                    .leases(tokio_stream::wrappers::ReceiverStream::new(queue))
                    .await?
                    .into_inner();
                self.open.insert(Open { asks, replies })
            }
        };
        open.replies.message().await?.ok_or_else(closed)
    }
}

/// Each ask's answer, in the order asked (`pulling[i]`: whether ask `i` was a pull).
fn answer(
    pulling: &[bool],
    pulls: Vec<u32>,
    mut reply: pb::LeasesReply,
) -> Vec<Result<Told, Status>> {
    let mut completed = std::mem::take(&mut reply.completed).into_iter();
    let mut pulled = hand_out(pulls, reply).into_iter();
    pulling
        .iter()
        .map(|&pull| {
            let missing = || Status::internal("the orchestrator left an ask unanswered");
            if pull {
                pulled.next().ok_or_else(missing).map(Told::Pulled)
            } else {
                let c = completed.next().ok_or_else(missing)?;
                refused(c.refused).map(|()| Told::Completed(c.settled))
            }
        })
        .collect()
}

/// Each pulling worker's share of a reply.
fn hand_out(workers: Vec<u32>, mut reply: pb::LeasesReply) -> Vec<Pulled> {
    let otherwise = if reply.done {
        Pulled::Done
    } else {
        Pulled::Wait(Duration::from_millis(u64::from(reply.retry_after_ms)))
    };
    workers
        .into_iter()
        .map(|worker| {
            let mine = reply.leases.iter().position(|l| l.worker == worker);
            match mine {
                Some(i) => Pulled::Lease(Box::new(reply.leases.swap_remove(i))),
                None => otherwise.clone(),
            }
        })
        .collect()
}

/// A judge's verdict records, shared by its grades.
#[derive(Clone)]
pub struct Records(Coalescer<pb::GradeRecord, bool>);

impl Records {
    pub fn new(client: Client) -> Records {
        Records(Coalescer::new(move |records: Vec<pb::GradeRecord>| {
            let mut client = client.clone();
            async move {
                Ok(client
                    .record_results(pb::RecordResultsRequest { records })
                    .await?
                    .into_inner()
                    .recorded
                    .into_iter()
                    .map(|r| refused(r.refused).map(|()| r.settled))
                    .collect())
            }
        }))
    }

    /// Records one verdict; `true` when it settled its task (and the settle
    /// is on disk).
    pub async fn record(&self, record: pb::GradeRecord) -> Result<bool, Status> {
        self.0.call(record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn what_queues_during_a_call_goes_out_in_the_next_one() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let doubling = Coalescer::new(move |items: Vec<u32>| {
            seen.lock().unwrap().push(items.len());
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(items.into_iter().map(|i| Ok(i * 2)).collect())
            }
        });
        let first = tokio::spawn({
            let c = doubling.clone();
            async move { c.call(1).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let rest: Vec<_> = (2..=5)
            .map(|i| {
                let c = doubling.clone();
                tokio::spawn(async move { c.call(i).await })
            })
            .collect();
        assert_eq!(first.await.unwrap().unwrap(), 2);
        for (i, answer) in (2..=5).zip(rest) {
            assert_eq!(
                answer.await.unwrap().unwrap(),
                i * 2,
                "answers go to their askers"
            );
        }
        assert_eq!(*sizes.lock().unwrap(), vec![1, 4]);
    }

    /// On tokio's multi-threaded runtime the coalescer, woken by the first
    /// request, would run before the other workers the same event woke.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn workers_woken_together_go_out_in_one_call() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let echo = Coalescer::new(move |items: Vec<u32>| {
            seen.lock().unwrap().push(items.len());
            async move { Ok(items.into_iter().map(Ok).collect()) }
        });
        let (release, released) = tokio::sync::watch::channel(false);
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let (c, mut released) = (echo.clone(), released.clone());
                tokio::spawn(async move {
                    released.wait_for(|go| *go).await.unwrap();
                    c.call(i).await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        // Woken from a task, as a reply's answers wake workers: from outside
        // the runtime, the first could run before the rest are woken.
        tokio::spawn(async move { release.send(true) })
            .await
            .unwrap()
            .unwrap();
        for (i, worker) in (0..8).zip(workers) {
            assert_eq!(worker.await.unwrap().unwrap(), i);
        }
        assert_eq!(*sizes.lock().unwrap(), vec![8]);
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_request_it_carried_and_only_those() {
        let calls = Arc::new(Mutex::new(0));
        let counted = calls.clone();
        let flaky = Coalescer::new(move |items: Vec<u32>| {
            let n = {
                let mut c = counted.lock().unwrap();
                *c += 1;
                *c
            };
            async move {
                if n == 1 {
                    Err(Status::unavailable("down"))
                } else {
                    Ok(items
                        .into_iter()
                        .map(|i| {
                            if i == 0 {
                                Err(Status::not_found("no 0"))
                            } else {
                                Ok(i)
                            }
                        })
                        .collect())
                }
            }
        });
        let err = flaky.call(7).await.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable);
        let (zero, seven) = tokio::join!(flaky.call(0), flaky.call(7));
        assert_eq!(zero.unwrap_err().code(), Code::NotFound);
        assert_eq!(seven.unwrap(), 7);
    }

    #[test]
    fn each_worker_gets_its_own_lease_and_the_rest_wait() {
        let lease = |worker: u32| pb::Lease {
            lease_id: format!("l{worker}"),
            worker,
            ..Default::default()
        };
        let reply = pb::LeasesReply {
            leases: vec![lease(3), lease(1)],
            retry_after_ms: 500,
            ..Default::default()
        };
        let shares = hand_out(vec![1, 2, 3], reply);
        assert_eq!(
            shares,
            [
                Pulled::Lease(Box::new(lease(1))),
                Pulled::Wait(Duration::from_millis(500)),
                Pulled::Lease(Box::new(lease(3)))
            ]
        );
        let done = pb::LeasesReply {
            done: true,
            ..Default::default()
        };
        assert_eq!(hand_out(vec![4], done), [Pulled::Done]);
    }

    #[test]
    fn completions_and_pulls_of_one_call_are_answered_in_the_order_asked() {
        let reply = pb::LeasesReply {
            completed: vec![
                pb::Completed {
                    settled: true,
                    refused: None,
                },
                pb::Completed {
                    settled: false,
                    refused: Some(pb::Refusal {
                        code: Code::NotFound as i32,
                        message: "no lease x".into(),
                    }),
                },
            ],
            done: true,
            ..Default::default()
        };
        let told = answer(&[false, true, false], vec![5], reply);
        assert!(matches!(told[0], Ok(Told::Completed(true))));
        assert!(matches!(told[1], Ok(Told::Pulled(Pulled::Done))));
        assert!(matches!(&told[2], Err(s) if s.code() == Code::NotFound));
        let short = answer(&[false], Vec::new(), pb::LeasesReply::default());
        assert!(matches!(&short[0], Err(s) if s.code() == Code::Internal));
    }
}
