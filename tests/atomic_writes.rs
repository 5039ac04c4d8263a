//! Outputs are written atomically (docs/GUIDE.md: run files and reports are
//! "written atomically", a temporary file in the same folder and then a
//! rename). An interrupted writer leaves the previous file whole, never a
//! prefix of the new one, and a normal run leaves no temporary file behind.
//! Without a model: run files come from `score`.

use crate::common;

use common::{bin, ok, posrecall, s};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Function `i` of a generated corpus: 22 long, distinct body lines.
fn function(i: usize) -> String {
    let mut f = format!("function fn{i:03}(x, y) {{\n");
    for k in 1..=21 {
        f.push_str(&format!("  var v{i}_{k} = x * {k} + y; // a line long enough to weigh in the report\n"));
    }
    f.push_str(&format!("  return v{i}_1;\n}}\n\n"));
    f
}

/// Inputs large enough that writing the output takes a while: a targets
/// file of 400 targets, answers with every kind of line, and `runs/` holding
/// eight run files of them (their HTML report is about 11 MB).
struct Inputs {
    dir: TempDir,
    targets: PathBuf,
    responses: PathBuf,
    runs: PathBuf,
}

fn inputs() -> Inputs {
    let dir = TempDir::new().unwrap();
    let corpus = dir.path().join("corpus.js");
    std::fs::write(&corpus, (0..400).map(function).collect::<String>()).unwrap();
    let printed = ok(&posrecall(&["targets", s(&corpus), "--json", "--count", "400"]));
    let targets = dir.path().join("targets.json");
    std::fs::write(&targets, &printed).unwrap();
    // Each answer: one line missing, one hallucinated, two extra.
    let file: Value = serde_json::from_str(&printed).unwrap();
    let mut jsonl = String::new();
    for t in file["targets"].as_array().unwrap() {
        let strings = |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(|l| l.as_str().unwrap().into()).collect() };
        let mut lines = strings(&t["expected"])[1..].to_vec();
        lines.push("var hallucinated = 1;".into());
        lines.extend(strings(&t["extra_window"]).into_iter().take(2));
        jsonl.push_str(&(json!({"name": t["name"], "response": lines.join("\n")}).to_string() + "\n"));
    }
    let responses = dir.path().join("responses.jsonl");
    std::fs::write(&responses, jsonl).unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    ok(&posrecall(&["score", s(&targets), s(&responses), "--out", s(&runs.join("a.json")), "--quiet"]));
    for name in ["b", "c", "d", "e", "f", "g", "h"] {
        std::fs::copy(runs.join("a.json"), runs.join(format!("{name}.json"))).unwrap();
    }
    Inputs { dir, targets, responses, runs }
}

/// Every entry of `dir`, dot-files (temporary files) included.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|n| n.to_string()).collect()
}

fn report_cmd(inputs: &[&Path], out: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("report").args(inputs).args(["--format", "html", "-o"]).arg(out).env("NO_COLOR", "1");
    cmd
}

#[test]
fn a_normal_run_leaves_the_outputs_whole_and_no_temporary_file() {
    let i = inputs();
    let o = TempDir::new().unwrap();
    let (html, run, prompts) = (o.path().join("report.html"), o.path().join("run.json"), o.path().join("prompts.jsonl"));
    // Twice: a new file, then a file replaced.
    for _ in 0..2 {
        ok(&report_cmd(&[&i.runs], &html).output().unwrap());
        ok(&posrecall(&["score", s(&i.targets), s(&i.responses), "--out", s(&run), "--quiet"]));
        ok(&posrecall(&["targets", s(&i.dir.path().join("corpus.js")), "--count", "9", "--emit-prompts", s(&prompts)]));
        assert_eq!(entries(o.path()), names(&["prompts.jsonl", "report.html", "run.json"]));
    }
    let page = ok(&posrecall(&["report", s(&i.runs), "--format", "html"]));
    assert_eq!(std::fs::read_to_string(&html).unwrap(), page, "the file is the page, whole");
    assert_eq!(std::fs::read(&run).unwrap(), std::fs::read(i.runs.join("a.json")).unwrap());
    assert_eq!(std::fs::read_to_string(&prompts).unwrap().lines().count(), 9);
}

/// `cmd` with its largest file limited to `limit` bytes and SIGXFSZ
/// ignored: a write past the limit fails part way (EFBIG), as on a full disk.
fn with_file_size_limit(cmd: &mut Command, limit: u64) -> &mut Command {
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        })
    }
}

/// One error line naming `out`, the previous `out` byte for byte, and no
/// temporary file left in its folder.
fn assert_cut_short(o: &Output, out: &Path, old: &[u8], what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{what}: {} {err}", o.status);
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line: {err}");
    assert!(err.contains(&format!("cannot write {}", out.display())) && err.contains("File too large"), "{what}: {err}");
    let now = std::fs::read(out).unwrap();
    assert!(now == old, "{what}: the previous file is now {} bytes, not its {} (a write in place?)", now.len(), old.len());
    let name = out.file_name().unwrap().to_str().unwrap();
    assert_eq!(entries(out.parent().unwrap()), names(&[name]), "{what}: a temporary file is left");
}

#[test]
fn a_write_cut_short_leaves_the_previous_file_whole() {
    const LIMIT: u64 = 1 << 20;
    let i = inputs();
    let o = TempDir::new().unwrap();

    // A report: the previous one of a single run, the new one 11 MB.
    let html = o.path().join("report.html");
    ok(&report_cmd(&[&i.runs.join("a.json")], &html).output().unwrap());
    let old = std::fs::read(&html).unwrap();
    let out = with_file_size_limit(&mut report_cmd(&[&i.runs], &html), LIMIT).output().unwrap();
    assert_cut_short(&out, &html, &old, "report -o");
    std::fs::remove_file(&html).unwrap();

    // A run file: the previous one scored from no answer, the new one 3 MB.
    let run = o.path().join("run.json");
    let empty = i.dir.path().join("none.jsonl");
    std::fs::write(&empty, "").unwrap();
    ok(&posrecall(&["score", s(&i.targets), s(&empty), "--out", s(&run), "--quiet"]));
    let old = std::fs::read(&run).unwrap();
    assert!(std::fs::metadata(i.runs.join("a.json")).unwrap().len() > LIMIT, "the new run file passes the limit");
    let mut cmd = Command::new(bin());
    cmd.args(["score", s(&i.targets), s(&i.responses), "--out", s(&run), "--quiet"]);
    assert_cut_short(&with_file_size_limit(&mut cmd, LIMIT).output().unwrap(), &run, &old, "score --out");
}

/// Kills `child` as soon as `out` is no longer the file `old` describes
/// (another inode, size or time), or when it has ended.
fn kill_at_first_change(child: &mut Child, out: &Path, old: &std::fs::Metadata) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let changed = match std::fs::metadata(out) {
            Ok(m) => m.ino() != old.ino() || m.len() != old.len() || m.mtime_nsec() != old.mtime_nsec(),
            Err(_) => true,
        };
        if changed || child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the report neither wrote nor ended in 120 s");
        std::hint::spin_loop();
    }
    let _ = child.kill();
}

/// Half the kills land at moments spread over a report's whole run, half the
/// instant its output changes (where a write in place would be caught half
/// done). After each, the output is the old file or the new one, whole.
#[test]
fn a_writer_killed_at_any_moment_leaves_the_old_file_or_the_new_one() {
    const TRIES: u32 = 24;
    let i = inputs();
    let o = TempDir::new().unwrap();
    let out = o.path().join("report.html");
    ok(&report_cmd(&[&i.runs.join("a.json")], &out).output().unwrap());
    let old = std::fs::read(&out).unwrap();
    // The fastest of three runs: kills spread over it land while a run is
    // still going, even when one of the three was slowed down.
    let reference = i.dir.path().join("reference.html");
    let took = (0..3)
        .map(|_| {
            let started = Instant::now();
            ok(&report_cmd(&[&i.runs], &reference).output().unwrap());
            started.elapsed()
        })
        .min()
        .unwrap();
    let new = std::fs::read(&reference).unwrap();
    assert!(new.len() > 4 * old.len(), "the new report is the large one");

    let mut interrupted = 0;
    for n in 0..TRIES {
        std::fs::write(&out, &old).unwrap();
        let before = std::fs::metadata(&out).unwrap();
        let mut child = report_cmd(&[&i.runs], &out).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        if n % 2 == 0 {
            std::thread::sleep(took * n / TRIES);
            let _ = child.kill();
        } else {
            kill_at_first_change(&mut child, &out, &before);
        }
        let pid = child.id();
        if child.wait().unwrap().signal() == Some(libc::SIGKILL) {
            interrupted += 1;
        }
        let now = std::fs::read(&out).unwrap();
        assert!(
            now == old || now == new,
            "kill {n}: the output is {} bytes, neither the old file ({}) nor the new one ({})",
            now.len(),
            old.len(),
            new.len()
        );
        // A SIGKILL leaves nothing but what the killed writer had open: its
        // temporary file, or the probe that checks the folder takes a file.
        for name in entries(o.path()).into_iter().filter(|e| e != "report.html") {
            let own = name.starts_with(&format!(".report.html.tmp-{pid}-")) || name == format!(".posrecall-write-probe-{pid}");
            assert!(own, "kill {n} left {name}");
            std::fs::remove_file(o.path().join(name)).unwrap();
        }
    }
    // Kills that all came after the end would have proved nothing.
    assert!(interrupted >= TRIES / 4, "only {interrupted} of {TRIES} kills interrupted the report");
}

/// An output that is a symbolic link is written through (the link stays, the
/// file it names gets the output); one that is not a regular file (a device
/// node, a FIFO: only ones this test makes) is written into, never replaced
/// by a plain file. Each write leaves no temporary file.
#[test]
fn links_are_written_through_and_special_files_written_into() {
    use std::os::unix::fs::FileTypeExt;
    let i = inputs();
    let dir = TempDir::new().unwrap();
    let real = dir.path().join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink("sub/new.json", &dangling).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for out in [&link, &dangling] {
        ok(&posrecall(&["score", s(&i.targets), s(&i.responses), "--out", s(out), "--quiet"]));
        assert!(std::fs::symlink_metadata(out).unwrap().file_type().is_symlink(), "{} is no longer a link", out.display());
    }
    for written in [real.clone(), dir.path().join("sub/new.json")] {
        let run: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
        assert_eq!(run["manifest"]["command"], "score", "{}", written.display());
    }

    // A FIFO: the output arrives through it, and it is still a FIFO.
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    ok(&posrecall(&["report", s(&i.runs.join("a.json")), "--format", "json", "-o", s(&fifo)]));
    let through = reader.join().unwrap();
    let report: Value = serde_json::from_slice(&through).unwrap();
    assert!(report["runs"].is_array(), "{report}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A character device of our own (as root: the null device's numbers).
    let null = dir.path().join("null");
    if Command::new("mknod").arg(&null).args(["c", "1", "3"]).status().is_ok_and(|st| st.success()) {
        ok(&posrecall(&["report", s(&i.runs.join("a.json")), "--format", "csv", "-o", s(&null)]));
        assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device(), "the device became a file");
    } else {
        assert_ne!(unsafe { libc::geteuid() }, 0, "root could not make a device node");
    }
    let left: Vec<String> = entries(dir.path()).into_iter().filter(|e| e.contains(".tmp-")).collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_new_output_gets_the_umask_mode_and_a_replaced_one_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let i = inputs();
    let dir = TempDir::new().unwrap();
    // The umask the child inherits (umask can only be read by setting it).
    let umask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    } as u32;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let new = dir.path().join("new.json");
    ok(&posrecall(&["report", s(&i.runs.join("a.json")), "--format", "json", "-o", s(&new)]));
    assert_eq!(mode(&new), 0o666 & !umask, "a new output is not readable as the umask allows (temporary files are 0600)");
    let kept = dir.path().join("kept.csv");
    std::fs::write(&kept, "old").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&posrecall(&["report", s(&i.runs.join("a.json")), "--format", "csv", "-o", s(&kept)]));
    assert_ne!(std::fs::read(&kept).unwrap(), b"old");
    assert_eq!(mode(&kept), 0o640);
}
