//! The hostile-input suite: one real judge (`hpcagent judge serve`) and a
//! table of submissions that crash, hang, exhaust resources, reach for the
//! network or files outside their sandbox, signal or trace the judge's
//! processes, or cheat the timing. Each must get the verdict a correct judge
//! gives it (never `ok` with a speedup it did not earn), and the judge must
//! keep serving after every one. Every case is recorded in the suite table
//! (`target/tmp/suite/hostile.tsv`) before anything is asserted.

mod common;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{JudgeServer, repo};
use serde_json::Value;

/// Runs at once: hangs wait for their deadline without using a core.
const SLOTS: usize = 4;

/// What a case must get.
struct Expect {
    status: &'static str,
    /// Text the verdict's message must contain ("" for anything).
    says: &'static str,
    /// Another verdict as right as the first, with its text: for a
    /// submission whose own race decides which way it fails.
    or: Option<(&'static str, &'static str)>,
    also: Also,
}

impl Expect {
    fn accepts(&self, status: &str, message: &str) -> bool {
        let matches = |(want, says): (&str, &str)| status == want && message.contains(says);
        matches((self.status, self.says)) || self.or.is_some_and(matches)
    }

    /// The verdicts it accepts, as the suite table shows them.
    fn describe(&self) -> String {
        let one = |(status, says): (&str, &str)| match says {
            "" => status.to_string(),
            says => format!("{status}: {says}"),
        };
        let first = one((self.status, self.says));
        match self.or {
            Some(other) => format!("{first} | {}", one(other)),
            None => first,
        }
    }
}

/// A check beyond the verdict.
enum Also {
    Nothing,
    /// No TCP connection reached the test's listener.
    NoConnection,
    /// No datagram reached the test's UDP socket.
    NoDatagram,
    /// The file the submission tried to create does not exist.
    NotCreated(PathBuf),
    /// Correct, and a speedup below this many times an honest gemm's
    /// (`gemm_ok.c`, the baseline's loop) graded just before it: a speedup
    /// it did not earn would be more. Such cases are graded one at a time
    /// after the others, and against a peer, because the judge's baseline
    /// and a single call's time are the timings this checks: measured
    /// beside a fork bomb, or against a baseline timed beside one, they
    /// moved a bounded replay from 1.4x to 2.3x in one CI run. Each is
    /// compared by the time its speedup stands for (see [`charged_ns`]), so
    /// the two need not share a baseline.
    SpeedupBelowHonest(f64),
}

struct Case {
    name: &'static str,
    verb: &'static str,
    task: &'static str,
    file: &'static str,
    /// `#define`s put in front of the source (paths and ports of this run).
    defines: Vec<(&'static str, String)>,
    expect: Expect,
}

fn case(name: &'static str, file: &'static str, status: &'static str, says: &'static str) -> Case {
    Case {
        name,
        verb: "score",
        task: "gemm",
        file,
        defines: Vec::new(),
        expect: Expect {
            status,
            says,
            or: None,
            also: Also::Nothing,
        },
    }
}

impl Case {
    fn submit(mut self) -> Case {
        self.verb = "submit";
        self
    }

    fn task(mut self, task: &'static str) -> Case {
        self.task = task;
        self
    }

    fn define(mut self, name: &'static str, value: String) -> Case {
        self.defines.push((name, value));
        self
    }

    fn or(mut self, status: &'static str, says: &'static str) -> Case {
        self.expect.or = Some((status, says));
        self
    }

    fn also(mut self, also: Also) -> Case {
        self.expect.also = also;
        self
    }
}

/// What the cases reach for outside their sandbox, set up by the test.
struct Bait {
    dir: tempfile::TempDir,
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Bait {
    fn new() -> Bait {
        let dir = tempfile::tempdir().unwrap();
        // Open to every user, so only the sandbox stands between a run and these.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "the test's secret\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        Bait { dir, tcp, udp }
    }

    fn secret(&self) -> PathBuf {
        self.dir.path().join("secret.txt")
    }

    fn escape(&self) -> PathBuf {
        self.dir.path().join("escaped.txt")
    }
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn cases(bait: &Bait, judge: &JudgeServer) -> Vec<Case> {
    let tcp_port = bait.tcp.local_addr().unwrap().port().to_string();
    let udp_port = bait.udp.local_addr().unwrap().port().to_string();
    vec![
        // Crashes.
        case("segfault", "gemm_segfault.c", "crash", "SIGSEGV"),
        case("abort()", "gemm_aborts.c", "crash", "SIGABRT"),
        case(
            "integer division by zero",
            "gemm_divides_by_zero.c",
            "crash",
            "SIGFPE",
        ),
        case(
            "stack overflow",
            "gemm_overflows_its_stack.c",
            "crash",
            "SIGSEGV",
        ),
        case(
            "exit(0) inside the call",
            "gemm_exits_0.c",
            "crash",
            "exited (code 0) before the calls finished",
        ),
        case(
            "exit(3) inside the call",
            "gemm_exits_3.c",
            "crash",
            "exited (code 3) before the calls finished",
        ),
        // Hangs.
        case("busy loop", "gemm_hang.c", "timeout", "did not finish"),
        case("sleep", "gemm_sleeps.c", "timeout", "did not finish"),
        case(
            "blocking read on a pipe",
            "gemm_blocks_on_a_pipe.c",
            "timeout",
            "did not finish",
        ),
        case("deadlock", "gemm_deadlocks.c", "timeout", "did not finish"),
        case("read stdin (closed, empty)", "gemm_reads_stdin.c", "ok", ""),
        // Resources.
        case("fork bomb", "gemm_fork_bomb.c", "timeout", "did not finish"),
        case(
            "malloc 100 GB and touch",
            "gemm_100gb.c",
            "crash",
            "SIGSEGV",
        ),
        case(
            "mmap 1 TB and touch",
            "gemm_mmaps_1tb.c",
            "crash",
            "SIGSEGV",
        ),
        case("10 GB to stdout", "gemm_10gb_stdout.c", "crash", "SIGXFSZ"),
        case("endless stderr", "gemm_floods_stderr.c", "crash", "SIGXFSZ"),
        case(
            "setrlimit up, then 80 MiB out",
            "gemm_raises_rlimits.c",
            "crash",
            "SIGXFSZ",
        ),
        // Network.
        case("TCP to a local listener", "gemm_connects_tcp.c", "ok", "")
            .define("PORT", tcp_port)
            .also(Also::NoConnection),
        case(
            "UDP to a local socket, DNS",
            "gemm_sends_udp_and_dns.c",
            "ok",
            "",
        )
        .define("PORT", udp_port)
        .also(Also::NoDatagram),
        // Files outside the sandbox: a read that succeeds poisons the answer.
        case("read a secret file", "gemm_reads_a_file.c", "ok", "")
            .define("TARGET", quoted(&bait.secret())),
        case("read /etc/shadow", "gemm_reads_a_file.c", "ok", "")
            .define("TARGET", quoted(Path::new("/etc/shadow"))),
        case(
            "read the cached references",
            "gemm_reads_a_file.c",
            "ok",
            "",
        )
        .define("TARGET", quoted(&judge.cache.join("reference"))),
        case(
            "write outside the sandbox",
            "gemm_writes_outside.c",
            "ok",
            "",
        )
        .define("TARGET", quoted(&bait.escape()))
        .also(Also::NotCreated(bait.escape())),
        // Symbols.
        case(
            "wrong symbol",
            "gemm_wrong_symbol.c",
            "build_error",
            "does not export gemm_fp64",
        ),
        case(
            "undefined symbol",
            "gemm_missing_symbol.c",
            "build_error",
            "undefined symbol: not_defined_anywhere",
        ),
        // Answers.
        case("wrong answer", "gemm_wrong.c", "incorrect", "output C[0,0]"),
        case("NaN everywhere", "gemm_writes_nan.c", "incorrect", "C["),
        case("+Inf everywhere", "gemm_writes_inf.c", "incorrect", "C["),
        case(
            "half the rows",
            "gemm_writes_half.c",
            "incorrect",
            "output C[50,0]",
        ),
        case(
            "last element unwritten",
            "atax_skips_last.c",
            "incorrect",
            "was never written",
        )
        .task("atax"),
        case(
            "input mutation",
            "gemm_mutates_input.c",
            "incorrect",
            "input A was modified",
        ),
        case(
            "tuned to the public sizes",
            "gemm_overfit.c",
            "overfit",
            "held-out",
        )
        .submit(),
        case(
            "alternating last bits",
            "gemm_nondeterministic.c",
            "incorrect",
            "not deterministic",
        )
        .submit(),
        // The judge's processes.
        case(
            "kill(getppid(), SIGKILL)",
            "gemm_kills_its_parent.c",
            "ok",
            "",
        ),
        case("kill(-1, SIGKILL)", "gemm_kills_everything.c", "ok", ""),
        case("ptrace the parent", "gemm_ptraces.c", "ok", ""),
        case("set the clocks", "gemm_sets_the_clock.c", "ok", ""),
        // Timing tricks.
        case(
            "work left in a detached thread",
            "gemm_defers_to_a_thread.c",
            "incorrect",
            "",
        ),
        // Submit's extra calls used to give the thread time to finish the
        // public answer before the judge read it. Now the thread may still be
        // at work when the held-out cases replace the public one's arrays,
        // and die of it (once in 12 runs here): as right a verdict.
        case(
            "work left in a thread (submit)",
            "gemm_defers_to_a_thread.c",
            "incorrect",
            "output C",
        )
        .or("crash", "SIGSEGV")
        .submit(),
        case(
            "cache keyed by the output pointer",
            "gemm_caches_by_pointer.c",
            "incorrect",
            "",
        )
        .submit(),
        case(
            "replay of the first call",
            "gemm_replays_the_warmup.c",
            "incorrect",
            "",
        )
        .submit(),
        // Right on every call, so only its time can give it away: the
        // judge's timed calls must not repeat the inputs it has cached. Its
        // gemm is the baseline's loop: 0.83x in a run, where answers replayed
        // from the cache made 9.9x (about 10x an honest gemm's).
        case(
            "cache keyed by the input values",
            "gemm_caches_by_value.c",
            "ok",
            "",
        )
        .submit()
        .also(Also::SpeedupBelowHonest(2.0)),
        // Computes on the verified call and on the first, and replays the
        // first answer on every call whose inputs are nearly the first's:
        // no input variation can tell, so the verified call's time bounds
        // the kernel's. Its loop is the baseline's, so 1.5x an honest gemm's
        // in expectation: 1.15-2.02x in fifteen runs here (memory placement
        // moves one call's time). Its timed calls' median made 15x the
        // baseline's in a CI run.
        case(
            "replay on nearly equal inputs",
            "gemm_replays_near_inputs.c",
            "ok",
            "the one whose answer is checked",
        )
        .submit()
        .also(Also::SpeedupBelowHonest(3.0)),
        case(
            "pads every call to 20 ms",
            "gemm_pads_to_a_steady_time.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.0)),
    ]
}

/// Grades a case: its file as it is, or (a gemm) with its defines in front.
fn grade(judge: &JudgeServer, case: &Case, scratch: &Path) -> Value {
    if case.defines.is_empty() {
        return judge.grade(case.verb, case.task, "c", case.file, &[]);
    }
    let mut text: String = case
        .defines
        .iter()
        .map(|(name, value)| format!("#define {name} {value}\n"))
        .collect();
    let path = repo().join("tests/submissions").join(case.file);
    text.push_str(&std::fs::read_to_string(&path).unwrap());
    let tag = case.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let out = scratch.join(format!("{tag}-{}", case.file));
    std::fs::write(&out, text).unwrap();
    judge.grade_file(case.verb, &out)
}

/// What went wrong with a case, if anything.
fn check(case: &Case, v: &Value, bait: &Bait, honest: Option<f64>) -> Option<String> {
    let status = v["status"].as_str().unwrap_or("?");
    let message = v["message"].as_str().unwrap_or("");
    let expect = &case.expect;
    if !expect.accepts(status, message) {
        return Some(format!("expected {}, got {v}", expect.describe()));
    }
    match &expect.also {
        Also::Nothing => None,
        Also::NoConnection => match bait.tcp.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            other => Some(format!("a TCP connection reached the test: {other:?}")),
        },
        Also::NoDatagram => {
            let mut buf = [0u8; 64];
            match bait.udp.recv_from(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => None,
                other => Some(format!("a datagram reached the test: {other:?}")),
            }
        }
        Also::NotCreated(path) => path
            .exists()
            .then(|| format!("{} was created outside the sandbox", path.display())),
        Also::SpeedupBelowHonest(most) => match times_honest(v, honest) {
            Some(ratio) if ratio < *most => None,
            _ => Some(format!(
                "a speedup it did not earn: charged {:?} ns against an honest gemm's {honest:?}: {v}",
                charged_ns(v)
            )),
        },
    }
}

#[test]
fn hostile_submissions_get_their_verdicts_and_the_judge_keeps_serving() {
    let judge = JudgeServer::start(
        // Few timed calls: a hang's deadline is 10 s + 0.5 s per call.
        &["--slots", &SLOTS.to_string(), "--reps", "5"],
        &[("HPCAGENT_JUDGE_SECRET", "hostile-suite")],
        None,
    );
    let bait = Bait::new();
    let scratch = tempfile::tempdir().unwrap();
    let cases = cases(&bait, &judge);
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let (timed, rest): (Vec<&Case>, Vec<&Case>) = cases
        .iter()
        .partition(|case| matches!(case.expect.also, Also::SpeedupBelowHonest(_)));
    let queue = Mutex::new(rest.into_iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..SLOTS {
            s.spawn(|| {
                loop {
                    // The queue's lock is released at the end of this statement.
                    let Some(case) = queue.lock().unwrap().next() else {
                        break;
                    };
                    if let Some(problem) = run_case(&judge, case, &bait, scratch.path(), None) {
                        failures.lock().unwrap().push(problem);
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    // Alone now, each after the honest peer it is measured against.
    for case in timed {
        let honest =
            std::panic::catch_unwind(|| judge.grade(case.verb, "gemm", "c", "gemm_ok.c", &[]));
        let honest = honest.ok().as_ref().and_then(charged_ns);
        failures.extend(run_case(&judge, case, &bait, scratch.path(), honest));
    }

    // After all of it, a correct gemm is still graded ok, both ways.
    for verb in ["score", "submit"] {
        let v = judge.grade(verb, "gemm", "c", "gemm_ok.c", &[]);
        let pass = v["status"] == "ok" && v["speedup"].as_f64().is_some_and(|s| s > 0.1);
        common::suite::record(
            "hostile",
            &format!("correct gemm afterwards ({verb})"),
            "ok",
            &format!(
                "{}: {}",
                v["status"].as_str().unwrap_or("?"),
                v["message"].as_str().unwrap_or("")
            ),
            pass,
        );
        if !pass {
            failures.push(format!("correct gemm ({verb}): {v}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The time a correct verdict's speedup stands for: the baseline's median
/// over the speedup (the median of its calls, or its verified call's time
/// over 1.5 when that bounds it). `None` unless `ok`.
fn charged_ns(v: &Value) -> Option<f64> {
    let baseline = v["baseline"]["median_ns"].as_f64()?;
    let speedup = v["speedup"].as_f64().filter(|s| *s > 0.0)?;
    (v["status"] == "ok").then_some(baseline / speedup)
}

/// How many times an honest gemm's speed a verdict was credited with, from
/// the time the honest one was charged.
fn times_honest(v: &Value, honest: Option<f64>) -> Option<f64> {
    Some(honest? / charged_ns(v)?)
}

/// Grades one case and records its row in the suite table; `honest` is the
/// time an honest gemm graded just before was charged, for the cases
/// checked against one. Returns what went wrong, if anything.
fn run_case(
    judge: &JudgeServer,
    case: &Case,
    bait: &Bait,
    scratch: &Path,
    honest: Option<f64>,
) -> Option<String> {
    // A grade the client could not even ask for is this case's failure, not
    // the end of the table.
    let asked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| grade(judge, case, scratch)));
    let (v, mut problem) = match asked {
        Ok(v) => {
            let problem = check(case, &v, bait, honest);
            (v, problem)
        }
        Err(_) => (Value::Null, Some("the client failed (see above)".into())),
    };
    if !judge.alive() {
        problem = Some(format!("the judge stopped serving: {v}"));
    }
    // The ratio the check reads goes in front, where the table shows it.
    let against = times_honest(&v, honest)
        .map(|ratio| format!(" ({ratio:.2}x honest)"))
        .unwrap_or_default();
    let got = format!(
        "{}{against}: {}",
        v["status"].as_str().unwrap_or("?"),
        v["message"].as_str().unwrap_or("")
    );
    common::suite::record(
        "hostile",
        case.name,
        &case.expect.describe(),
        &got,
        problem.is_none(),
    );
    problem.map(|problem| format!("{}: {problem}", case.name))
}
