//! Running the battery: a worker process per variant that takes one case at a time, each under its
//! own timeout. The worker runs in its own process group; a case that does not answer in time has
//! the whole group killed (a hang is a result, not a stuck run) and the next case gets a fresh
//! worker. A worker that dies, or reports a broken CUDA context, is replaced the same way.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::eval::{Raw, RawOutcome};

/// Prefix of protocol lines (anything else the process prints is ignored).
pub const MARK: &str = "@@SPLITPKG-SMOKE@@ ";

/// How to start the Python side of one variant.
#[derive(Debug, Clone)]
pub struct PySpec {
    /// The Python interpreter to run (a path or a name on PATH).
    pub python: String,
    /// The script it runs (`-u SCRIPT ARGS…`).
    pub script: PathBuf,
    /// Extra environment (PYTHONPATH for a bare torch directory, TORCH_LINALG_PREFER_CUSOLVER when emulating).
    pub env: Vec<(String, String)>,
    /// Scratch directory for per-case output files.
    pub workdir: PathBuf,
}

impl PySpec {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.python);
        c.arg("-u").arg(&self.script).args(args);
        c.current_dir(&self.workdir);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1");
        c.process_group(0);
        c
    }
}

/// The JSON value of a protocol line (one that starts with [`MARK`]); None for any other line or
/// bad JSON.
pub fn decode(line: &str) -> Option<Value> {
    line.strip_prefix(MARK)
        .and_then(|rest| serde_json::from_str(rest.trim_end()).ok())
}

fn kill_group(child: &mut Child) {
    let pid = child.id() as i32;
    // SAFETY: signalling the process group we created (process_group(0) makes pgid == pid).
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn exit_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}{}", signal_name(s)),
        _ => "unknown exit".into(),
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGKILL => " (SIGKILL)",
        _ => "",
    }
}

#[allow(clippy::disallowed_methods)] // why: the child's stderr capture this module created in its own scratch directory.
/// The last `limit` bytes of the file at `path` (a child's captured stderr), cut at a character
/// boundary; empty when it cannot be read.
pub fn tail_of(path: &Path, limit: usize) -> String {
    tail_text(&std::fs::read(path).unwrap_or_default(), limit)
}

/// The last `limit` bytes of a process's output, cut at a character boundary.
fn tail_text(data: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(data);
    if text.len() <= limit {
        return text.into_owned();
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// Why a Python process of the smoke run gave no usable answer. Cloneable (the I/O cause is
/// shared), because a worker that cannot start is reported on every case it would have run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    /// The process could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program that was run.
        program: String,
        /// Why it could not be.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file a child's stderr is captured in could not be created in the scratch directory.
    #[error("{path}: {source}")]
    Scratch {
        /// The file's path.
        path: String,
        /// Why it could not be created.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// No answer within the timeout: the process group was killed.
    #[error("{what} did not finish within {secs}s: {stderr}")]
    Timeout {
        /// What was run (`probe`, or a helper command such as finding torch).
        what: String,
        /// The timeout, in seconds.
        secs: u64,
        /// The tail of the process's stderr.
        stderr: String,
    },
    /// The process ended without a protocol answer.
    #[error("{what} gave no answer ({status}): {stderr}")]
    NoAnswer {
        /// What was run (`probe`, or a helper command such as finding torch).
        what: String,
        /// How it ended (exit status or signal).
        status: String,
        /// The tail of the process's stderr.
        stderr: String,
    },
    /// The worker answered that it could not start: the last line of its error.
    #[error("worker did not start: {0}")]
    WorkerFailed(String),
    /// The worker did not say it was ready within the ready timeout.
    #[error("worker not ready within {secs}s: {stderr}")]
    WorkerNotReady {
        /// The ready timeout, in seconds.
        secs: u64,
        /// The tail of the worker's stderr.
        stderr: String,
    },
    /// The worker ended before it said it was ready.
    #[error("worker exited before it was ready ({status}): {stderr}")]
    WorkerExited {
        /// How it ended (exit status or signal).
        status: String,
        /// The tail of the worker's stderr.
        stderr: String,
    },
}

fn spawn_error(c: &Command, e: std::io::Error) -> RunError {
    RunError::Spawn {
        program: c.get_program().to_string_lossy().into_owned(),
        source: Arc::new(e),
    }
}

/// Run a one-shot command (no stdin) in its own process group and collect its output; on
/// `timeout` the whole group is killed and what it printed on stderr so far is kept. The one
/// bounded run of the smoke stage (`find_torch`, the probe); the long-lived workers have their own
/// line protocol below.
pub fn run_bounded(
    mut c: Command,
    what: &str,
    timeout: Duration,
) -> Result<std::process::Output, RunError> {
    c.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().map_err(|e| spawn_error(&c, e))?;
    let pid = child.id() as i32;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(|e| spawn_error(&c, e)),
        Err(_) => {
            // SAFETY: signalling the process group we created (process_group(0) makes pgid == pid).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            // With the group dead its pipes close, and the waiting thread returns what was printed.
            let stderr = rx
                .recv_timeout(Duration::from_secs(5))
                .ok()
                .and_then(|r| r.ok())
                .map(|o| o.stderr)
                .unwrap_or_default();
            Err(RunError::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
                stderr: tail_text(&stderr, 1500).trim().to_string(),
            })
        }
    }
}

/// Run `battery.py probe` once, with a timeout. Returns the decoded answer or why there is none.
pub fn run_probe(spec: &PySpec, lazy: &str, timeout: Duration) -> Result<Value, RunError> {
    let out = run_bounded(spec.command(&["probe", "--lazy", lazy]), "probe", timeout)?;
    let found = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(decode)
        .next_back();
    found.ok_or_else(|| RunError::NoAnswer {
        what: "probe".into(),
        status: exit_text(out.status),
        stderr: tail_text(&out.stderr, 1500).trim().to_string(),
    })
}

enum Recv {
    Line(Value),
    Timeout,
    Eof,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Option<Value>>,
    stderr_path: PathBuf,
}

impl Worker {
    fn start(
        spec: &PySpec,
        base_pref: &str,
        n: usize,
        ready_timeout: Duration,
    ) -> Result<Worker, RunError> {
        let stderr_path = spec.workdir.join(format!("worker-{n}.stderr"));
        let err = std::fs::File::create(&stderr_path).map_err(|e| RunError::Scratch {
            path: stderr_path.display().to_string(),
            source: Arc::new(e),
        })?;
        let mut child = spec
            .command(&["worker", "--base-pref", base_pref])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| RunError::Spawn {
                program: spec.python.clone(),
                source: Arc::new(e),
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(v) = decode(&line)
                    && tx.send(Some(v)).is_err()
                {
                    return;
                }
            }
            let _ = tx.send(None);
        });
        let mut w = Worker {
            child,
            stdin,
            rx,
            stderr_path,
        };
        match w.recv(ready_timeout) {
            Recv::Line(v) if v.get("ready").and_then(|r| r.as_bool()) == Some(true) => Ok(w),
            Recv::Line(v) => {
                let msg = v
                    .get("error")
                    .and_then(|e| e.as_str())
                    .unwrap_or("not ready")
                    .to_string();
                w.kill();
                Err(RunError::WorkerFailed(
                    msg.lines().last().unwrap_or("").trim().to_string(),
                ))
            }
            Recv::Timeout => {
                w.kill();
                Err(RunError::WorkerNotReady {
                    secs: ready_timeout.as_secs(),
                    stderr: tail_of(&w.stderr_path, 1000).trim().to_string(),
                })
            }
            Recv::Eof => {
                let status = w.child.wait().map(exit_text).unwrap_or_default();
                Err(RunError::WorkerExited {
                    status,
                    stderr: tail_of(&w.stderr_path, 1000).trim().to_string(),
                })
            }
        }
    }

    fn recv(&mut self, timeout: Duration) -> Recv {
        match self.rx.recv_timeout(timeout) {
            Ok(Some(v)) => Recv::Line(v),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => Recv::Eof,
            Err(RecvTimeoutError::Timeout) => Recv::Timeout,
        }
    }

    fn send(&mut self, msg: &str) -> std::io::Result<()> {
        self.stdin.write_all(msg.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()
    }

    fn kill(&mut self) {
        kill_group(&mut self.child);
    }

    fn finish(mut self) {
        let _ = self.send("quit");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }
}

/// Limits for one battery run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long one case may run before its worker is killed.
    pub case_timeout: Duration,
    /// How long a worker may take to import torch and say it is ready.
    pub ready_timeout: Duration,
    /// After this many timeouts of one op, its remaining cases are not run (reported as timeouts).
    pub timeouts_per_op: u32,
    /// No job starts after this instant (`--deadline`): the rest are reported as not run.
    pub deadline: Option<Instant>,
}

/// One unit of work for the worker: the JSON it gets (an `id` and `op` at least).
pub struct WorkerJob {
    /// The case's (or bench item's) id.
    pub id: String,
    /// The op to run (`linalg.cholesky`); timeouts are counted per op.
    pub op: String,
    /// The whole JSON the worker gets (with `id` and `op`).
    pub payload: Value,
}

/// Run `jobs` in order on workers started from `spec`; `on_result` sees each raw result as it
/// arrives (for judging and progress). Returns one raw result per job, in order.
pub fn run_jobs(
    spec: &PySpec,
    base_pref: &str,
    jobs: &[WorkerJob],
    limits: &Limits,
    on_result: impl FnMut(usize, &Raw),
) -> Vec<Raw> {
    run_jobs_on(Started(None), spec, base_pref, jobs, limits, on_result)
}

/// A worker started ahead of its jobs ([`start_ahead`]); killed if it is never used.
pub struct Started(Option<Worker>);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(mut w) = self.0.take() {
            w.kill();
        }
    }
}

impl Started {
    /// The worker's process id, if it started.
    pub fn pid(&self) -> Option<u32> {
        self.0.as_ref().map(|w| w.child.id())
    }
}

/// Start a worker for `spec` now, for [`run_jobs_on`] later: its start-up (Python, `import torch`,
/// the CUDA context: about 3 s on the H200 machine) then overlaps other work. A worker that does not
/// start is not an error here: `run_jobs_on` starts one itself and records why it cannot.
pub fn start_ahead(spec: &PySpec, base_pref: &str, ready_timeout: Duration) -> Started {
    Started(Worker::start(spec, base_pref, 1, ready_timeout).ok())
}

/// [`run_jobs`] with its first worker already started.
pub fn run_jobs_on(
    mut first: Started,
    spec: &PySpec,
    base_pref: &str,
    jobs: &[WorkerJob],
    limits: &Limits,
    mut on_result: impl FnMut(usize, &Raw),
) -> Vec<Raw> {
    let mut run = JobRun {
        spec,
        base_pref,
        limits,
        worker: first.0.take(),
        started: 0,
        timeouts: HashMap::new(),
        fatal: None,
    };
    run.started = usize::from(run.worker.is_some());
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let raw = run.job(i, job);
        on_result(i, &raw);
        out.push(raw);
    }
    if let Some(w) = run.worker {
        w.finish();
    }
    out
}

/// A job list on its way through workers: the worker of the moment (replaced after a hang, a
/// death or a broken CUDA context) and what stops the jobs still to come.
struct JobRun<'a> {
    spec: &'a PySpec,
    base_pref: &'a str,
    limits: &'a Limits,
    worker: Option<Worker>,
    /// Workers started so far, the one started ahead included (it names their stderr files).
    started: usize,
    /// Timeouts so far, by op.
    timeouts: HashMap<&'a str, u32>,
    /// A worker that cannot start will not start for the next case either.
    fatal: Option<RunError>,
}

fn not_run(detail: String) -> Raw {
    let mut r = Raw::new(RawOutcome::NotRun);
    r.detail = Some(detail);
    r
}

impl<'a> JobRun<'a> {
    /// Run job `i` on the current worker (started first if there is none) and take its answer,
    /// or why there is none.
    fn job(&mut self, i: usize, job: &'a WorkerJob) -> Raw {
        if let Some(why) = self.skipped(job) {
            return not_run(why);
        }
        if self.worker.is_none() {
            self.started += 1;
            match Worker::start(
                self.spec,
                self.base_pref,
                self.started,
                self.limits.ready_timeout,
            ) {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    let r = not_run(e.to_string());
                    self.fatal = Some(e);
                    return r;
                }
            }
        }
        let w = self.worker.as_mut().expect("started");
        let stderr_path = self.spec.workdir.join(format!("case-{i}.out"));
        let mut payload = job.payload.clone();
        payload["stderr_path"] = Value::String(stderr_path.display().to_string());
        if let Err(e) = w.send(&payload.to_string()) {
            let status = w.child.wait().map(exit_text).unwrap_or_default();
            self.kill_worker();
            let mut r = Raw::new(RawOutcome::Crash);
            r.detail = Some(format!("worker gone before the case ({e}; {status})"));
            return r;
        }
        let begun = Instant::now();
        match w.recv(self.limits.case_timeout) {
            Recv::Line(v) => {
                let r = Raw::from_worker(&v);
                if r.context_ok == Some(false) || v.get("reset_error").is_some() {
                    // The worker exits by itself; make sure it is gone.
                    self.kill_worker();
                }
                r
            }
            Recv::Timeout => self.timed_out(job, begun, &stderr_path),
            Recv::Eof => self.died(begun, &stderr_path),
        }
    }

    /// Why `job` is not run: no worker can start, the deadline is past, or its op hung too often.
    fn skipped(&self, job: &WorkerJob) -> Option<String> {
        if let Some(reason) = &self.fatal {
            return Some(reason.to_string());
        }
        if self.limits.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some("the run's --deadline was reached".into());
        }
        let t = self.timeouts.get(job.op.as_str()).copied().unwrap_or(0);
        (t >= self.limits.timeouts_per_op)
            .then(|| format!("{} timed out {t} times already in this variant", job.op))
    }

    fn kill_worker(&mut self) {
        if let Some(mut w) = self.worker.take() {
            w.kill()
        }
    }

    /// No answer in time: the worker's group is killed and the hang counted against its op.
    fn timed_out(&mut self, job: &'a WorkerJob, begun: Instant, stderr_path: &Path) -> Raw {
        self.kill_worker();
        *self.timeouts.entry(job.op.as_str()).or_default() += 1;
        let mut r = Raw::new(RawOutcome::Timeout);
        r.time_ms = Some(begun.elapsed().as_secs_f64() * 1e3);
        r.detail = Some(format!(
            "no answer within {}s; process group killed",
            self.limits.case_timeout.as_secs_f64()
        ));
        let text = tail_of(stderr_path, 4000);
        r.stderr = (!text.is_empty()).then_some(text);
        r
    }

    /// The worker died during the case: its exit status and last words.
    fn died(&mut self, begun: Instant, stderr_path: &Path) -> Raw {
        let mut w = self.worker.take().expect("worker");
        let status = w.child.wait().map(exit_text).unwrap_or_default();
        w.kill();
        let mut r = Raw::new(RawOutcome::Crash);
        r.time_ms = Some(begun.elapsed().as_secs_f64() * 1e3);
        let text = tail_of(stderr_path, 4000);
        r.detail = Some(format!(
            "{status}; last output: {}",
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("none")
                .trim()
        ));
        r.stderr = (!text.is_empty()).then_some(text);
        r
    }
}
