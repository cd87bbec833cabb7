//! The plugin author's path (`plugin new`, `plugin build`, `plugin test`), run outside the repository: in a
//! temporary directory, in every language, with the commands of docs/first-plugin.md exactly as written there.
//!
//! These need the guest toolchains (`make test` installs them first, through `make guests`); without one, the
//! build step fails with the line naming what is missing and the command that installs it. Rust projects build
//! into the shared guest target directory (`$KWS_CACHE/guest-target`), so the standard library and the SDK's
//! dependencies are compiled once per machine.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{root, TempDir};

/// The scheduler binary, run in `dir` with Rust guests building into the shared guest target directory.
fn kws(dir: &Path) -> Command {
    let cache = std::env::var_os("KWS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/kube-wasm-scheduler"));
    let mut c = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"));
    c.current_dir(dir).env("CARGO_TARGET_DIR", cache.join("guest-target"));
    c
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs `args` in `dir` and returns its standard output; a failure fails the test with what the command printed.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = kws(dir).args(args).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "kube-wasm-scheduler {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    stdout
}

/// The commands docs/first-plugin.md gives for `lang`: the ```sh block after `<!-- commands: LANG -->`.
fn doc_commands(lang: &str) -> Vec<String> {
    let page = std::fs::read_to_string(root().join("docs/first-plugin.md")).unwrap();
    let marker = format!("<!-- commands: {lang} -->");
    let after = page.split_once(&marker).unwrap_or_else(|| panic!("docs/first-plugin.md has no {marker}")).1;
    let block = after.trim_start().strip_prefix("```sh\n").expect("a ```sh block after the marker");
    block.split_once("```").unwrap().0.lines().map(str::to_string).filter(|l| !l.trim().is_empty()).collect()
}

/// Runs the page's commands for `lang` in a fresh temporary directory, as a shell would (`cd` changes directory,
/// `kube-wasm-scheduler` is the binary under test); returns each command with its standard output.
fn run_doc(lang: &str, tmp: &TempDir) -> Vec<(String, String)> {
    let mut cwd = tmp.0.clone();
    let mut outputs = Vec::new();
    for line in doc_commands(lang) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["cd", dir] => cwd = cwd.join(dir),
            ["kube-wasm-scheduler", args @ ..] => outputs.push((line.clone(), ok(&cwd, args))),
            _ => panic!("docs/first-plugin.md: the test cannot run {line:?}"),
        }
    }
    outputs
}

/// The output of the command that starts with `prefix`.
fn output_of<'a>(outputs: &'a [(String, String)], prefix: &str) -> &'a str {
    &outputs.iter().find(|(c, _)| c.starts_with(prefix)).unwrap_or_else(|| panic!("no command {prefix}")).1
}

/// The node a pod went to in a `simulate` table.
fn placed_on(table: &str, pod: &str) -> Option<String> {
    table.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.first() == Some(&pod)).then(|| cols.get(1).map(|s| s.to_string())).flatten()
    })
}

/// The whole page for one language: the project builds, serves Filter and Score, and the sample policy decides:
/// the node without the label is refused by the plugin (in `--explain`), and the pod goes to the node with the
/// higher label (without the plugin the two labelled nodes tie).
fn first_plugin(lang: &str) {
    let tmp = TempDir::new(lang);
    let outputs = run_doc(lang, &tmp);
    let project = tmp.0.join("my-filter");
    assert!(project.join("build/my-filter.wasm").is_file());
    let build = output_of(&outputs, "kube-wasm-scheduler plugin build");
    assert!(build.contains("extension points: Filter, Score\n"), "{build}");
    for prefix in ["kube-wasm-scheduler plugin test", "kube-wasm-scheduler simulate"] {
        let out = output_of(&outputs, prefix);
        assert_eq!(placed_on(out, "default/web-1").as_deref(), Some("node-b"), "{prefix}:\n{out}");
        assert!(
            out.contains("node-c                             UnschedulableAndUnresolvable (MyFilter): node(s) didn't have label priority.example.com"),
            "{prefix}:\n{out}"
        );
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("MyFilter (3)")),
            "{prefix}: no MyFilter score row\n{out}"
        );
    }
}

#[test]
fn first_plugin_rust() {
    first_plugin("rust");
}

#[test]
fn first_plugin_c() {
    first_plugin("c");
}

#[test]
fn first_plugin_python() {
    first_plugin("python");
}

#[test]
fn first_plugin_js() {
    first_plugin("js");
}

/// The SDK's export line exports only the points listed: a Filter-only plugin is registered at Filter alone (no
/// Score row for it in the explanation), though the profile enables it with multiPoint and a weight.
#[test]
fn filter_only_plugin_registers_only_at_filter() {
    let tmp = TempDir::new("filter-only");
    ok(&tmp.0, &["plugin", "new", "only-filter", "--lang", "rust", "--points", "filter"]);
    let project = tmp.0.join("only-filter");
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
    assert!(lib.contains("kws_plugin_sdk::export!(OnlyFilter: filter);"), "{lib}");
    let build = ok(&project, &["plugin", "build"]);
    assert!(build.contains("extension points: Filter\n"), "{build}");
    let check = ok(&project, &["plugin", "check", "build/only-filter.wasm"]);
    assert!(check.contains("extension points: Filter\n"), "{check}");
    assert!(!check.contains("kws:plugin/score"), "{check}");
    let out = ok(&project, &["plugin", "test"]);
    assert!(out.contains("(OnlyFilter): node(s) didn't have label priority.example.com"), "{out}");
    assert!(!out.contains("OnlyFilter (3)"), "{out}");
}

/// Every extension point at once: the sample compiles for each, the component serves all twelve, and the profile
/// `plugin new` writes (the plugin as the profile's QueueSort) loads and schedules.
#[test]
fn every_point_builds_and_schedules() {
    let tmp = TempDir::new("every-point");
    let points =
        "pre-enqueue,queue-sort,pre-filter,filter,post-filter,pre-score,score,reserve,permit,pre-bind,bind,post-bind";
    ok(&tmp.0, &["plugin", "new", "every-point", "--lang", "rust", "--points", points]);
    let project = tmp.0.join("every-point");
    let build = ok(&project, &["plugin", "build"]);
    assert!(
        build.contains(
            "extension points: PreEnqueue, QueueSort, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Permit, PreBind, Bind, PostBind\n"
        ),
        "{build}"
    );
    let out = ok(&project, &["plugin", "test"]);
    assert_eq!(placed_on(&out, "default/web-1").as_deref(), Some("node-b"), "{out}");
}

/// Bad requests are one line each, exit code 2, and write nothing.
#[test]
fn plugin_new_refuses_bad_input() {
    let tmp = TempDir::new("bad-input");
    std::fs::create_dir(tmp.0.join("taken")).unwrap();
    std::fs::write(tmp.0.join("taken/file"), "").unwrap();
    std::fs::create_dir(tmp.0.join("bad-world")).unwrap();
    std::fs::write(tmp.0.join("bad-world/plugin.yaml"), "name: bad-world\nlanguage: c\nworld: Gang Plugin\n").unwrap();
    for (args, want) in [
        (
            &["plugin", "new", "My_Plugin", "--lang", "rust"][..],
            "error: plugin name \"My_Plugin\": must consist of lower case",
        ),
        (&["plugin", "new", "9lives", "--lang", "rust"], "error: plugin name \"9lives\": must start with a letter"),
        (&["plugin", "new", "ok", "--lang", "go"], "error: unknown language \"go\" (rust, c, python, js)"),
        (
            &["plugin", "new", "ok", "--lang", "rust", "--points", "filter,scor"],
            "error: --points: unknown extension point \"scor\"",
        ),
        (
            &["plugin", "new", "ok", "--lang", "python", "--points", "permit"],
            "error: --points: permit is not served by python plugins",
        ),
        (&["plugin", "new", "taken", "--lang", "c"], "error: taken: exists and is not empty"),
        (&["plugin", "build", "taken"], "error: taken/plugin.yaml: not found: not a plugin project"),
        (
            &["plugin", "build", "bad-world"],
            "error: bad-world/plugin.yaml: world: \"Gang Plugin\" is not a world name of the contract",
        ),
    ] {
        let out = kws(&tmp.0).args(args).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.starts_with(want), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    assert!(!tmp.0.join("ok").exists());
    let out = kws(&tmp.0).args(["plugin", "setup", "--lang", "go"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out).1, "error: unknown language \"go\" (rust, c, python, js)\n");
}

/// A missing toolchain is one line naming it and the command that installs it (here: no tools installed under
/// an empty `KWS_CACHE`, and a `PATH` without them).
#[test]
fn plugin_build_names_a_missing_toolchain() {
    let tmp = TempDir::new("no-tools");
    for (lang, want) in [
        (
            "python",
            "error: componentize-py not found; install it with `kube-wasm-scheduler plugin setup --lang python`\n",
        ),
        ("js", "error: componentize-js (in "),
    ] {
        ok(&tmp.0, &["plugin", "new", lang, "--lang", lang]);
        let out = kws(&tmp.0.join(lang))
            .args(["plugin", "build"])
            .env("KWS_CACHE", tmp.0.join("empty-cache"))
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{lang}: {stderr}");
        assert!(stderr.starts_with(want), "{lang}: {stderr}");
        assert!(
            stderr.trim_end().ends_with("install it with `kube-wasm-scheduler plugin setup --lang js`") || lang != "js",
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{lang}: {stderr}");
    }
}

/// The iteration loop of the README's timing: `simulate --watch` on a project, an edit of the policy, `plugin
/// build`, and the running simulator picks up the new component and runs again with it.
#[test]
fn watch_picks_up_a_rebuilt_plugin() {
    let tmp = TempDir::new("watch");
    ok(&tmp.0, &["plugin", "new", "my-filter", "--lang", "rust"]);
    let project = tmp.0.join("my-filter");
    ok(&project, &["plugin", "build"]);
    /// Stops the simulator however the test ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Running(
        kws(&project)
            .args(["simulate", "--watch", "--config", "profile.yaml", "--cluster", "cluster.yaml"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |node: &str| {
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
                if placed_on(&line, "default/web-1").as_deref() == Some(node) {
                    return;
                }
                seen.push(line);
            }
        }
        panic!("simulate --watch never placed default/web-1 on {node}; it printed:\n{}", seen.join("\n"));
    };
    wait_for("node-b");
    // The edit of the README's timing: prefer the lower label.
    let lib = project.join("src/lib.rs");
    let policy = std::fs::read_to_string(&lib).unwrap();
    let edited = policy.replace("Ok(node.data().unwrap_or(0))", "Ok(100 - node.data().unwrap_or(0))");
    assert_ne!(edited, policy, "the sample's Score line changed: update this test and the README's timing");
    std::fs::write(&lib, edited).unwrap();
    ok(&project, &["plugin", "build"]);
    wait_for("node-a");
}
