//! The hostile-input suite: a real judge (`hpcagent judge serve`), run as
//! root and then as an unprivileged user, and a table of submissions that
//! crash, hang, exhaust resources, reach for the network, the node's Unix
//! sockets, IPC, other processes, inherited descriptors or files outside
//! their sandbox, signal or trace the judge's processes, or cheat the
//! timing (rewriting the runner's channel, patching its clock, computing in
//! a fault handler, knowing the public answer, computing on some calls
//! only, caching, slowing the baseline). Each must get the verdict a
//! correct judge gives it (never `ok` with a speedup it did not earn), and
//! the judge must keep serving after every one. Every case is recorded in
//! the suite table (`target/tmp/suite/hostile.tsv`) before anything is
//! asserted.

mod common;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{JudgeOptions, JudgeServer, Unprivileged, repo};
use serde_json::Value;

/// Runs at once: hangs wait for their deadline without using a core.
const SLOTS: usize = 4;

/// What a case must get.
struct Expect {
    status: &'static str,
    /// Text the verdict's message must contain ("" for anything).
    says: &'static str,
    /// Other verdicts as right as the first, with their text: for a
    /// submission whose own race decides which way it fails.
    or: Vec<(&'static str, &'static str)>,
    also: Also,
}

impl Expect {
    fn accepts(&self, status: &str, message: &str) -> bool {
        let matches = |(want, says): (&str, &str)| status == want && message.contains(says);
        matches((self.status, self.says)) || self.or.iter().copied().any(matches)
    }

    /// The verdicts it accepts, as the suite table shows them.
    fn describe(&self) -> String {
        let one = |(status, says): (&str, &str)| match says {
            "" => status.to_string(),
            says => format!("{status}: {says}"),
        };
        std::iter::once((self.status, self.says))
            .chain(self.or.iter().copied())
            .map(one)
            .collect::<Vec<_>>()
            .join(" | ")
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
    /// No Unix socket of the test (pathname or abstract) was connected to.
    NoUnixConnection,
    /// No System V object with the submission's key, nor its POSIX queue
    /// or memory, exists on the node.
    NoIpc,
    /// Not `ok`, or `ok` with a speedup below this many times that of an
    /// honest gemm (`gemm_ok.c`, the baseline's loop) graded just before it:
    /// a speedup it did not earn would be more. Such cases are graded one
    /// at a time after the others: a timing measured beside a fork bomb is
    /// noise. Each speedup is the ratio to its own grade's baseline,
    /// measured in the same run, so the two compare as they are.
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
            or: Vec::new(),
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
        self.expect.or.push((status, says));
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
    unix: UnixListener,
    abstract_unix: UnixListener,
}

/// The abstract Unix socket the test listens on (`gemm_connects_unix.c`).
const ABSTRACT_NAME: &[u8] = b"hpcagent-bait";

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
        let unix = UnixListener::bind(dir.path().join("bait.sock")).unwrap();
        std::fs::set_permissions(
            dir.path().join("bait.sock"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        unix.set_nonblocking(true).unwrap();
        let name = SocketAddr::from_abstract_name(ABSTRACT_NAME).unwrap();
        let abstract_unix = UnixListener::bind_addr(&name).unwrap();
        abstract_unix.set_nonblocking(true).unwrap();
        Bait {
            dir,
            tcp,
            udp,
            unix,
            abstract_unix,
        }
    }

    fn secret(&self) -> PathBuf {
        self.dir.path().join("secret.txt")
    }

    fn escape(&self) -> PathBuf {
        self.dir.path().join("escaped.txt")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("bait.sock")
    }
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn cases(bait: &Bait, judge: &JudgeServer, public: &PublicCase) -> Vec<Case> {
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
        // The flags' policy, in the source.
        case(
            "fast-math by a pragma made by a macro, and an optimize attribute",
            "gemm_sets_fast_math_in_source.c",
            "build_error",
            "#pragma GCC optimize sets -ffast-math, refused",
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
        // Other processes, state shared between runs, the node's sockets,
        // descriptors the judge inherited.
        case(
            "IPC: SysV, POSIX queue and memory",
            "gemm_shares_ipc.c",
            "ok",
            "",
        )
        .also(Also::NoIpc),
        case(
            "IPC again, in the next run (submit)",
            "gemm_shares_ipc.c",
            "ok",
            "",
        )
        .submit()
        .also(Also::NoIpc),
        case(
            "Unix sockets: a pathname and an abstract",
            "gemm_connects_unix.c",
            "ok",
            "",
        )
        .define("TARGET", quoted(&bait.socket()))
        .also(Also::NoUnixConnection),
        case(
            "other processes in /proc",
            "gemm_lists_processes.c",
            "ok",
            "",
        ),
        case(
            "descriptors the judge inherited",
            "gemm_reads_inherited_fds.c",
            "ok",
            "",
        ),
        // Its arrays' file (huge pages on a tmpfs) takes no seals.
        case(
            "shrinks the file its arrays lie in",
            "gemm_shrinks_its_buffers.c",
            "ok",
            "",
        ),
        case("fork, execve, system()", "gemm_forks_and_execs.c", "ok", ""),
        // The compiler sees no process of the node's either.
        case(
            "asks the preprocessor for the judge's /proc entry",
            "gemm_probes_proc_at_build.c",
            "ok",
            "",
        )
        .define("TARGET", format!("\"/proc/{}/status\"", judge.pid())),
        // The judge's processes. In its PID namespace a runner's parent is
        // no one: getppid() is 0, and kill(0) reaches its own group.
        case(
            "kill(getppid(), SIGKILL)",
            "gemm_kills_its_parent.c",
            "crash",
            "SIGKILL",
        ),
        case("kill(-1, SIGKILL)", "gemm_kills_everything.c", "ok", ""),
        case("ptrace the parent", "gemm_ptraces.c", "ok", ""),
        case("set the clocks", "gemm_sets_the_clock.c", "ok", ""),
        // Timing tricks. Every timed call's inputs are fresh and its
        // answer compared with the baseline's on the same inputs.
        case(
            "work left in a detached thread",
            "gemm_defers_to_a_thread.c",
            "incorrect",
            "",
        ),
        // Its thread, stopped with the rest of the runner between calls,
        // may still be writing the last call's answer over the next one's
        // arrays, and die of it: as right a verdict. Or it may finish the
        // public case's call before the stop lands, and not a held-out
        // one's: overfit, as right.
        case(
            "work left in a thread (submit)",
            "gemm_defers_to_a_thread.c",
            "incorrect",
            "",
        )
        .or("crash", "")
        .or("overfit", "")
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
        case(
            "computes on every third call only",
            "gemm_works_every_third_call.c",
            "incorrect",
            "",
        ),
        case(
            "computes in a SIGSEGV handler",
            "gemm_computes_in_a_fault_handler.c",
            "incorrect",
            "",
        )
        .or("crash", ""),
        // Its flood also makes the runner's own call channel non-blocking,
        // which ends the runner: as right a verdict.
        case(
            "floods the runner's channel with \"done\"",
            "gemm_floods_its_channel.c",
            "incorrect",
            "",
        )
        .or("crash", "")
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "patches the clock functions",
            "gemm_patches_the_clock.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "knows the public answer",
            "gemm_knows_the_public_answer.c",
            "ok",
            "",
        )
        .define("PUBLIC_A0_BITS", public.a0_bits.clone())
        .define("PUBLIC_C", public.c.clone())
        .submit()
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "cache keyed by the input values",
            "gemm_caches_by_value.c",
            "ok",
            "",
        )
        .submit()
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "replay on nearly equal inputs",
            "gemm_replays_near_inputs.c",
            "ok",
            "",
        )
        .submit()
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "a thread spinning between its calls",
            "gemm_spins_between_calls.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "pads every call to 20 ms",
            "gemm_pads_to_a_steady_time.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.0)),
        // A stopped runner that continues itself before the clock starts:
        // held by ptrace, and its filter refuses the means.
        case(
            "continues itself on the index write (O_ASYNC, F_SETSIG), short slice",
            "gemm_continues_itself_by_fasync.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "continues itself by a SIGCONT timer, short slice",
            "gemm_continues_itself_by_timer.c",
            "ok",
            "",
        )
        .also(Also::SpeedupBelowHonest(1.25)),
        case(
            "reopens its call channel, shrinks it and keeps it full",
            "gemm_fills_its_call_channel.c",
            "ok",
            "",
        )
        .or("timeout", "")
        .also(Also::SpeedupBelowHonest(1.25)),
        // Stalls: the submission's timeout, never the judge's error.
        case(
            "fills its call channel and never drains it",
            "gemm_stalls_its_call_channel.c",
            "ok",
            "",
        )
        .or("timeout", ""),
        case(
            "stalls mid-frame on its report channel while loading",
            "gemm_stalls_its_report.c",
            "timeout",
            "did not finish loading",
        ),
    ]
}

/// The public case of gemm at S as the judge's cache holds it after a
/// grade: its first input value's bits and its answer, as C text.
struct PublicCase {
    a0_bits: String,
    c: String,
}

impl PublicCase {
    /// Read from `cache` once a grade has made the public case's files.
    fn read(cache: &Path) -> PublicCase {
        let a_bytes = 100 * 120 * 8;
        let inputs = std::fs::read_dir(cache.join("inputs")).unwrap();
        let public = inputs
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|dir| std::fs::metadata(dir.join("A.bin")).is_ok_and(|m| m.len() == a_bytes))
            .expect("the public case's inputs in the cache");
        let key = public.file_name().unwrap();
        let a = std::fs::read(public.join("A.bin")).unwrap();
        let c = std::fs::read(cache.join("reference").join(key).join("C.bin")).unwrap();
        let values: Vec<String> = c
            .chunks_exact(8)
            .map(|e| format!("{:e}", f64::from_le_bytes(e.try_into().unwrap())))
            .collect();
        PublicCase {
            a0_bits: format!("{:#x}ULL", u64::from_le_bytes(a[..8].try_into().unwrap())),
            c: format!("{{{}}}", values.join(",")),
        }
    }
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

/// What went wrong with a case, if anything; `honest` is the speedup of
/// an honest gemm graded just before, for the cases checked against one.
fn check(case: &Case, v: &Value, bait: &Bait, honest: Option<f64>) -> Option<String> {
    let status = v["status"].as_str().unwrap_or("?");
    let message = v["message"].as_str().unwrap_or("");
    let expect = &case.expect;
    if !expect.accepts(status, message) {
        return Some(format!("expected {}, got {v}", expect.describe()));
    }
    let none_waiting = |accepted: std::io::Result<()>| match accepted {
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        other => Some(format!("a connection reached the test: {other:?}")),
    };
    match &expect.also {
        Also::Nothing => None,
        Also::NoConnection => none_waiting(bait.tcp.accept().map(|_| ())),
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
        Also::NoUnixConnection => none_waiting(bait.unix.accept().map(|_| ()))
            .or_else(|| none_waiting(bait.abstract_unix.accept().map(|_| ()))),
        Also::NoIpc => leftover_ipc(),
        Also::SpeedupBelowHonest(most) => match times_honest(v, honest) {
            None if status != "ok" => None,
            Some(ratio) if ratio < *most => None,
            _ => Some(format!(
                "a speedup it did not earn: {:?} against an honest gemm's {honest:?}: {v}",
                v["speedup"].as_f64()
            )),
        },
    }
}

/// The IPC objects `gemm_shares_ipc.c` asks for, if any exists on the node.
fn leftover_ipc() -> Option<String> {
    let key = format!("{}", 0x4850_4341u32);
    for table in ["shm", "sem", "msg"] {
        let text = std::fs::read_to_string(format!("/proc/sysvipc/{table}")).unwrap_or_default();
        if text
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(key.as_str()))
        {
            return Some(format!(
                "a System V {table} object with the run's key exists"
            ));
        }
    }
    ["/dev/shm/hpcagent-replay", "/dev/mqueue/hpcagent-replay"]
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| format!("{p} exists"))
}

#[test]
fn hostile_submissions_get_their_verdicts_and_the_judge_keeps_serving() {
    let bait = Bait::new();
    let mut failures = Vec::new();
    let user = Unprivileged::new();
    for unprivileged in [false, true] {
        let options = JudgeOptions {
            user: unprivileged.then_some(&user),
            inherit: Some(&bait.secret()),
            ..JudgeOptions::default()
        };
        let judge = JudgeServer::start_with(
            &["--slots", &SLOTS.to_string(), "--reps", "5"],
            &[("HPCAGENT_JUDGE_SECRET", "hostile-suite")],
            options,
        );
        let who = if unprivileged {
            "unprivileged judge"
        } else {
            "root judge"
        };
        failures.extend(suite(&judge, &bait, who));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether `case` is among those `HPCAGENT_HOSTILE_CASES` names (parts of
/// their names, separated by `|`), or there is no such list.
/// `scripts/defences-off.sh` picks the cases of the defences it takes off.
fn chosen(case: &Case) -> bool {
    std::env::var("HPCAGENT_HOSTILE_CASES")
        .map(|list| list.split('|').any(|part| case.name.contains(part)))
        .unwrap_or(true)
}

/// Every case against `judge` (named `who` in the table); what failed.
fn suite(judge: &JudgeServer, bait: &Bait, who: &str) -> Vec<String> {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // An honest grade first: it makes the public case the cases may know.
    let first = judge.grade("score", "gemm", "c", "gemm_ok.c", &[]);
    assert_eq!(first["status"], "ok", "{first}");
    // Its arrays lie on a tmpfs of the supervisor's own, on huge pages
    // where they fill one, as NumPy's do (the unprivileged judge's in its
    // user namespace): the runner crate's buffers tests see them mapped so.
    let buffers = first["buffers"].as_str().unwrap_or_default();
    assert!(
        buffers.starts_with("a tmpfs of huge pages: "),
        "{who}: {buffers}"
    );
    let public = PublicCase::read(&judge.cache);
    let cases = cases(bait, judge, &public);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let cases: Vec<Case> = cases.into_iter().filter(chosen).collect();
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
                    if let Some(problem) = run_case(judge, case, bait, scratch.path(), who, None) {
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
        let honest = honest
            .ok()
            .filter(|v| v["status"] == "ok")
            .and_then(|v| v["speedup"].as_f64());
        failures.extend(run_case(judge, case, bait, scratch.path(), who, honest));
    }

    // After all of it, a correct gemm is still graded ok, both ways.
    for verb in ["score", "submit"] {
        let v = judge.grade(verb, "gemm", "c", "gemm_ok.c", &[]);
        let pass = v["status"] == "ok" && v["speedup"].as_f64().is_some_and(|s| s > 0.1);
        common::suite::record(
            "hostile",
            &format!("{who}: correct gemm afterwards ({verb})"),
            "ok",
            &format!(
                "{}: {}",
                v["status"].as_str().unwrap_or("?"),
                v["message"].as_str().unwrap_or("")
            ),
            pass,
        );
        if !pass {
            failures.push(format!("{who}: correct gemm ({verb}): {v}"));
        }
    }
    failures
}

/// How many times an honest gemm's speedup a verdict was credited with.
fn times_honest(v: &Value, honest: Option<f64>) -> Option<f64> {
    let speedup = v["speedup"].as_f64().filter(|s| *s > 0.0)?;
    (v["status"] == "ok").then_some(speedup / honest?)
}

/// Grades one case and records its row in the suite table; `honest` is the
/// speedup of an honest gemm graded just before, for the cases checked
/// against one. Returns what went wrong, if anything.
fn run_case(
    judge: &JudgeServer,
    case: &Case,
    bait: &Bait,
    scratch: &Path,
    who: &str,
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
        &format!("{who}: {}", case.name),
        &case.expect.describe(),
        &got,
        problem.is_none(),
    );
    problem.map(|problem| format!("{who}: {}: {problem}", case.name))
}

/// A grade killed mid-call (its supervisor killed, as the judge's deadline
/// or the node's OOM killer would) leaves the node's timing lock free at
/// once: the lock belongs to the open file of the supervisor's own, which
/// neither its runners nor its judge hold a copy of. Another judge on the
/// node then times its grade.
#[test]
fn a_grade_killed_mid_call_frees_the_nodes_timing_lock_at_once() {
    let user = Unprivileged::new();
    let mut failures = Vec::new();
    for unprivileged in [false, true] {
        let who = if unprivileged {
            "unprivileged judge"
        } else {
            "root judge"
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let lock = dir.path().join("timing.lock");
        std::fs::write(&lock, "").unwrap();
        std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o666)).unwrap();
        let lock_text = lock.display().to_string();
        let env = [("HPCAGENT_TIMING_LOCK", lock_text.as_str())];
        let options = || JudgeOptions {
            user: unprivileged.then_some(&user),
            ..JudgeOptions::default()
        };
        let judge = JudgeServer::start_with(&["--reps", "5"], &env, options());
        let problem = std::thread::scope(|s| {
            // Calls of 0.1-0.4 s until the 30 s cap: the lock stays held.
            let holder =
                s.spawn(|| judge.grade("score", "gemm", "c", "gemm_takes_uneven_time.c", &[]));
            let freed = killed_mid_call(&judge, &lock);
            // The killed grade's verdict is the judge's business: only the lock is.
            let _ = holder.join();
            // A lock still held would keep the other judge waiting as long
            // as this one lives: the case has failed already.
            let other = freed.is_finite().then(|| {
                let other = JudgeServer::start_with(&["--reps", "5"], &env, options());
                other.grade("score", "gemm", "c", "gemm_ok.c", &[])["status"].clone()
            });
            let row = match &other {
                Some(status) => format!(
                    "freed {:.0} ms after; the other judge: {status}",
                    freed * 1e3
                ),
                None => "still held 5 s after".to_string(),
            };
            let pass = freed < 1.0 && other.is_some_and(|status| status == "ok");
            common::suite::record(
                "hostile",
                &format!("{who}: the timing lock after a grade killed mid-call"),
                "free within 1 s; another judge's grade ok",
                &row,
                pass,
            );
            (!pass).then_some(row)
        });
        failures.extend(problem.map(|p| format!("{who}: {p}")));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Waits until a grade of `judge` holds the timing lock at `lock` and a call
/// is under way, kills the grade's supervisor, and returns how many seconds
/// later the lock was free (infinity: not within 5 s).
fn killed_mid_call(judge: &JudgeServer, lock: &Path) -> f64 {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(lock).unwrap();
    let try_lock = || {
        // SAFETY: flock on a descriptor of ours.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if taken {
            // SAFETY: as above.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        }
        taken
    };
    let waited = std::time::Instant::now();
    while try_lock() {
        if waited.elapsed().as_secs() > 120 {
            panic!("the grade never took the timing lock");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A few of its 0.1-0.4 s calls into its pairs.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let supervisor = children(judge.pid())
        .into_iter()
        .find(|pid| command_line(*pid).contains("judge\0exec"))
        .expect("the grade's supervisor");
    // SAFETY: kill(2) on the supervisor found above.
    unsafe { libc::kill(supervisor as i32, libc::SIGKILL) };
    let killed = std::time::Instant::now();
    while !try_lock() {
        if killed.elapsed().as_secs() > 5 {
            return f64::INFINITY;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    killed.elapsed().as_secs_f64()
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                // The parent is the second field after the command's ")".
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn command_line(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .into_owned()
}
