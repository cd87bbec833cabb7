//! The install files agree with each other and with the repository: what the Dockerfile copies exists, the image
//! holds the binary and guests the Deployment and ConfigMap name, the RBAC names the Lease the configuration uses,
//! and the ConfigMap's configuration schedules (with the built guests in place of the image's), and the Dockerfile
//! follows deploy/image.txt, the list scripts/build-image.sh builds from. No container engine runs on the test
//! machines, so the Dockerfile itself is never built here; `make test-image` builds the list's image with buildah
//! and runs it (scripts/test-image.sh). The chart and the API server's view of the manifests are checked in
//! host/tests/e2e/deploy.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_yaml::Value;

use crate::util::root;
use crate::wasm::guest;

/// Where the image's guests live, as the ConfigMap names them.
const IMAGE_PLUGINS_DIR: &str = "/plugins/";

/// Every document of every file in deploy/manifests, in file order.
pub fn manifests() -> Vec<Value> {
    let dir = root().join("deploy/manifests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML in {}", dir.display());
    files.iter().flat_map(|f| documents(&std::fs::read_to_string(f).unwrap())).collect()
}

/// The non-empty documents of a multi-document YAML text.
pub fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text).map(|d| Value::deserialize(d).unwrap()).filter(|v| !v.is_null()).collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("deploy/manifests has no {kind} {name}"))
}

fn only<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let of_kind: Vec<&Value> = docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect();
    assert_eq!(of_kind.len(), 1, "deploy/manifests should hold one {kind}");
    of_kind[0]
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// The ConfigMap's KubeSchedulerConfiguration, parsed.
pub fn scheduler_config(docs: &[Value]) -> Value {
    let cm = only(docs, "ConfigMap");
    let data = cm["data"].as_mapping().expect("ConfigMap data");
    assert_eq!(data.len(), 1, "the ConfigMap holds one file, the configuration");
    let (_, text) = data.iter().next().unwrap();
    serde_yaml::from_str(str_of(text)).unwrap()
}

/// Every `args.component` of the configuration's profiles.
fn components(cfg: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for p in cfg["profiles"].as_sequence().unwrap() {
        for pc in p["pluginConfig"].as_sequence().into_iter().flatten() {
            if let Some(c) = pc["args"]["component"].as_str() {
                out.insert(c.to_string());
            }
        }
    }
    out
}

/// One Dockerfile instruction: its keyword (upper case), flags (`--from=build`) and arguments.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    flags: Vec<String>,
    args: Vec<String>,
    /// The stage it belongs to: the `AS` name of the last FROM, or its index.
    stage: String,
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn dockerfile() -> Vec<Instruction> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let mut logical = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(t);
            logical.push(std::mem::take(&mut cur));
        }
    }
    let mut stage = String::new();
    let mut froms = 0;
    logical
        .into_iter()
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            let keyword = words.next().unwrap().to_uppercase();
            let (flags, args): (Vec<String>, Vec<String>) = words.partition(|w| w.starts_with("--"));
            if keyword == "FROM" {
                stage = match args.iter().position(|a| a.eq_ignore_ascii_case("as")) {
                    Some(i) => args[i + 1].clone(),
                    None => froms.to_string(),
                };
                froms += 1;
            }
            Instruction { keyword, flags, args, stage: stage.clone() }
        })
        .collect()
}

/// The files the final stage installs from other stages: destination path -> source path.
fn installed(instrs: &[Instruction]) -> BTreeMap<String, String> {
    let last = &instrs.iter().rev().find(|i| i.keyword == "FROM").unwrap().stage;
    let mut out = BTreeMap::new();
    for i in instrs.iter().filter(|i| &i.stage == last && i.keyword == "COPY") {
        assert!(i.flags.iter().any(|f| f.starts_with("--from=")), "the runtime stage copies only built files: {i:?}");
        let (dest, sources) = i.args.split_last().unwrap();
        for s in sources {
            let to = if dest.ends_with('/') {
                format!("{dest}{}", Path::new(s).file_name().unwrap().to_str().unwrap())
            } else {
                assert_eq!(sources.len(), 1, "several sources need a directory destination: {i:?}");
                dest.clone()
            };
            out.insert(to, s.clone());
        }
    }
    out
}

#[test]
fn dockerfile_copies_only_what_the_build_context_holds() {
    let ignored: Vec<String> = std::fs::read_to_string(root().join(".dockerignore"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let mut copied = 0;
    for i in dockerfile().iter().filter(|i| i.keyword == "COPY" || i.keyword == "ADD") {
        if i.flags.iter().any(|f| f.starts_with("--from=")) {
            continue;
        }
        let (_, sources) = i.args.split_last().unwrap();
        for s in sources {
            assert!(root().join(s).exists(), "the Dockerfile copies {s}, which is not in the repository");
            assert!(!ignored.contains(s), "the Dockerfile copies {s}, which .dockerignore leaves out");
            copied += 1;
        }
    }
    assert!(copied >= 4, "the build stage copies the workspace (Cargo.toml, Cargo.lock, wit, host, guest-plugins)");
    // The workspace the build stage copies is the whole workspace: every member is under a copied folder.
    let members = workspace_members(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap());
    let copied_dirs: Vec<String> = dockerfile()
        .iter()
        .filter(|i| i.keyword == "COPY" && i.flags.is_empty())
        .flat_map(|i| i.args.split_last().unwrap().1.to_vec())
        .collect();
    for m in members {
        assert!(
            copied_dirs.iter().any(|d| m == *d || m.starts_with(&format!("{d}/"))),
            "workspace member {m} is not copied into the build stage"
        );
    }
}

/// The binary embeds files from outside `host/` (the contract, the SDK, the samples' glue, scripts): the build stage
/// must copy each, or the image's `cargo build` fails where no test can see it (no container engine here).
#[test]
fn dockerfile_copies_every_file_the_binary_embeds() {
    let copied: Vec<String> = dockerfile()
        .iter()
        .filter(|i| i.keyword == "COPY" && i.flags.is_empty())
        .flat_map(|i| i.args.split_last().unwrap().1.to_vec())
        .collect();
    let root = root().canonicalize().unwrap();
    let mut dirs = vec![root.join("host/src")];
    let mut embedded = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, _) in text.match_indices("include_") {
                let rest = &text[i..];
                let Some(arg) = ["include_str!(\"", "include_bytes!(\""].iter().find_map(|m| rest.strip_prefix(m))
                else {
                    continue;
                };
                let Some(rel) = arg.split('"').next() else { continue };
                let Ok(file) = path.parent().unwrap().join(rel).canonicalize() else { continue };
                let Ok(file) = file.strip_prefix(&root) else { continue };
                let file = file.to_string_lossy();
                if file.starts_with("host/") {
                    continue;
                }
                embedded += 1;
                assert!(
                    copied
                        .iter()
                        .any(|c| file == c.as_str() || file.starts_with(&format!("{}/", c.trim_end_matches('/')))),
                    "{} embeds {file}, which the Dockerfile's build stage does not copy",
                    path.display()
                );
            }
        }
    }
    assert!(embedded > 10, "found only {embedded} embedded files outside host/");
}

#[test]
fn the_image_holds_the_binary_and_guests_the_manifests_name() {
    let instrs = dockerfile();
    let installed = installed(&instrs);
    let docs = manifests();
    let deploy = only(&docs, "Deployment");
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    let command = str_of(&container["command"][0]);
    assert!(installed.contains_key(command), "the Deployment runs {command}; the image installs {installed:?}");
    let entrypoint = instrs.iter().rfind(|i| i.keyword == "ENTRYPOINT").expect("ENTRYPOINT");
    assert_eq!(entrypoint.args.join(" "), format!("[\"{command}\"]"), "ENTRYPOINT is the binary the Deployment runs");

    // The ConfigMap names exactly the guests the image installs, each built from its guest crate in the build
    // stage as scripts/build-guests.sh builds it.
    let cfg = scheduler_config(&docs);
    let named = components(&cfg);
    let shipped: BTreeSet<String> = installed.keys().filter(|p| p.ends_with(".wasm")).cloned().collect();
    assert_eq!(named, shipped, "components the ConfigMap names vs the ones the image installs");
    let build: String = instrs.iter().filter(|i| i.keyword == "RUN").map(|i| i.args.join(" ")).collect();
    for c in &named {
        let file = c.strip_prefix(IMAGE_PLUGINS_DIR).unwrap_or_else(|| panic!("{c} is not under {IMAGE_PLUGINS_DIR}"));
        let name = file.strip_suffix(".wasm").unwrap();
        assert!(root().join("guest-plugins").join(name).join("Cargo.toml").exists(), "no guest crate {name}");
        let source = &installed[c];
        assert!(build.contains(&format!("-o {source}")), "the build stage does not produce {source}");
        assert!(build.contains(&format!("-p {name}")), "the build stage does not build the crate {name}");
    }
}

/// deploy/image.txt: what the image holds, `kind` and its words per line.
fn image_list() -> Vec<(String, Vec<String>)> {
    std::fs::read_to_string(root().join("deploy/image.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut w = l.split_whitespace().map(str::to_string);
            (w.next().unwrap(), w.collect())
        })
        .collect()
}

/// The Dockerfile's final stage and scripts/build-image.sh (buildah, from scratch) follow one list,
/// deploy/image.txt: the same files at the same paths, built from the same sources; the Dockerfile's base is the
/// list's; user, port and entrypoint agree, and are the manifests'.
#[test]
fn the_dockerfile_and_the_buildah_build_follow_one_list() {
    let list = image_list();
    let one = |kind: &str| -> String {
        let of: Vec<&Vec<String>> = list.iter().filter(|(k, _)| k == kind).map(|(_, w)| w).collect();
        assert_eq!(of.len(), 1, "deploy/image.txt should hold one `{kind}` line");
        assert_eq!(of[0].len(), 1, "`{kind}` takes one word: {:?}", of[0]);
        of[0][0].clone()
    };
    let instrs = dockerfile();
    let installed = installed(&instrs);
    let files: BTreeMap<String, String> = list
        .iter()
        .filter(|(k, _)| k == "file")
        .map(|(_, w)| {
            assert_eq!(w.len(), 2, "file PATH SOURCE: {w:?}");
            (w[0].clone(), w[1].clone())
        })
        .collect();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        installed.keys().collect::<Vec<_>>(),
        "deploy/image.txt's files vs the Dockerfile's final stage"
    );
    let build: String = instrs.iter().filter(|i| i.keyword == "RUN").map(|i| i.args.join(" ")).collect();
    // The Dockerfile's words in order, flags included (the parsed instructions keep flags apart).
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let words: Vec<&str> =
        text.lines().filter(|l| !l.trim_start().starts_with('#')).flat_map(str::split_whitespace).collect();
    let words = words.join(" ").replace(" \\ ", " ");
    for (path, source) in &files {
        let built = &installed[path];
        if let Some(bin) = source.strip_prefix("bin:") {
            assert!(
                words.contains(&format!("cargo build --locked --release --bin {bin}")),
                "the build stage does not build the release binary {bin}"
            );
            assert!(words.contains(&format!("target/release/{bin} {built}")), "{built} is not the release {bin}");
        } else if let Some(guest) = source.strip_prefix("guest:") {
            assert!(build.contains(&format!("-p {guest}")), "the build stage does not build the guest {guest}");
            assert!(build.contains(&format!("-o {built}")), "the build stage does not produce {built}");
            assert!(
                built.ends_with(&format!("/{guest}.wasm")),
                "{path}: the Dockerfile copies {built}, the list says {source}"
            );
        } else {
            panic!("deploy/image.txt: {path} has an unknown source {source}");
        }
    }
    let last = &instrs.iter().rev().find(|i| i.keyword == "FROM").unwrap();
    assert_eq!(last.args.first(), Some(&one("base")), "the Dockerfile's runtime base");
    let last_of =
        |kw: &str| instrs.iter().rfind(|i| i.keyword == kw).unwrap_or_else(|| panic!("no {kw}")).args.join(" ");
    assert_eq!(last_of("USER"), one("user"));
    assert_eq!(last_of("EXPOSE"), one("port"));
    assert_eq!(last_of("ENTRYPOINT"), format!("[\"{}\"]", one("entrypoint")));

    // What the base brings, the buildah build makes: each item is one the script knows.
    let script = std::fs::read_to_string(root().join("scripts/build-image.sh")).unwrap();
    assert!(script.contains("deploy/image.txt"), "scripts/build-image.sh reads the list");
    let runtime: Vec<&String> = list.iter().filter(|(k, _)| k == "runtime").flat_map(|(_, w)| w).collect();
    for item in ["libs", "ca-certificates", "nonroot"] {
        assert!(runtime.iter().any(|r| *r == item), "the image needs runtime {item}");
    }
    for item in runtime {
        assert!(script.contains(&format!("\n    {item})")), "scripts/build-image.sh does not make runtime {item}");
    }

    // And the manifests run the entrypoint as the list's user, on its port.
    let docs = manifests();
    let pod = &only(&docs, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(str_of(&pod["containers"][0]["command"][0]), one("entrypoint"));
    let sc = &pod["securityContext"];
    assert_eq!(format!("{}:{}", sc["runAsUser"].as_u64().unwrap(), sc["runAsGroup"].as_u64().unwrap()), one("user"));
    assert_eq!(pod["containers"][0]["ports"][0]["containerPort"].as_u64().map(|p| p.to_string()), Some(one("port")));
}

#[test]
fn the_deployment_mounts_the_config_and_runs_as_its_service_account() {
    let docs = manifests();
    let deploy = only(&docs, "Deployment");
    let pod = &deploy["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"].as_sequence().unwrap().iter().map(str_of).collect();
    let flag = |name: &str| {
        args.iter().find_map(|a| a.strip_prefix(&format!("--{name}="))).unwrap_or_else(|| panic!("no --{name}"))
    };
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    let volumes = pod["volumes"].as_sequence().unwrap();
    let volume_at = |path: &str| -> &Value {
        let m = mounts
            .iter()
            .find(|m| path == str_of(&m["mountPath"]) || path.starts_with(&format!("{}/", str_of(&m["mountPath"]))))
            .unwrap_or_else(|| panic!("nothing is mounted at {path}"));
        volumes.iter().find(|v| v["name"] == m["name"]).unwrap()
    };
    // --config names the ConfigMap's file where the ConfigMap is mounted.
    let config = flag("config");
    let cm = only(&docs, "ConfigMap");
    assert_eq!(volume_at(config)["configMap"]["name"], cm["metadata"]["name"]);
    let key = Path::new(config).file_name().unwrap().to_str().unwrap();
    assert!(cm["data"].get(key).is_some(), "--config={config}: the ConfigMap has no key {key}");
    // The serving certificate goes to a writable emptyDir: the root filesystem is read-only.
    assert!(volume_at(flag("cert-dir")).get("emptyDir").is_some(), "--cert-dir is not an emptyDir");
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], Value::Bool(true));
    assert_eq!(pod["securityContext"]["runAsUser"].as_u64(), Some(65532), "the image's user");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["scheme"].as_str(), Some("HTTPS"), "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"].as_u64(), Some(10259), "{probe}");
    }

    // The Deployment runs as the ServiceAccount every binding names.
    let sa = only(&docs, "ServiceAccount");
    let (sa_name, sa_ns) = (str_of(&sa["metadata"]["name"]), str_of(&sa["metadata"]["namespace"]));
    assert_eq!(pod["serviceAccountName"].as_str(), Some(sa_name));
    assert_eq!(deploy["metadata"]["namespace"].as_str(), Some(sa_ns));
    let bindings: Vec<&Value> =
        docs.iter().filter(|d| matches!(d["kind"].as_str(), Some("ClusterRoleBinding" | "RoleBinding"))).collect();
    assert_eq!(bindings.len(), 5);
    for b in &bindings {
        let s = &b["subjects"].as_sequence().unwrap()[..];
        assert_eq!(s.len(), 1);
        assert_eq!((s[0]["name"].as_str(), s[0]["namespace"].as_str()), (Some(sa_name), Some(sa_ns)));
    }

    // Leader election's Lease is the one our Role lets the scheduler read and renew, in the Role's namespace.
    let cfg = scheduler_config(&docs);
    let le = &cfg["leaderElection"];
    assert_eq!(le["leaderElect"], Value::Bool(true));
    let role = find(&docs, "Role", "kube-wasm-scheduler-leader-election");
    assert_eq!(role["metadata"]["namespace"], le["resourceNamespace"]);
    let rule = &role["rules"][0];
    assert_eq!(rule["resources"][0].as_str(), Some("leases"));
    assert_eq!(rule["resourceNames"][0], le["resourceName"]);
    let binding = find(&docs, "RoleBinding", "kube-wasm-scheduler-leader-election");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(cfg["profiles"][0]["schedulerName"], le["resourceName"], "the Lease is named after the scheduler");
}

/// The ConfigMap's configuration with the image's guest paths replaced by the built guests.
pub fn local_config(docs: &[Value]) -> String {
    let mut cfg = scheduler_config(docs);
    for p in cfg["profiles"].as_sequence_mut().unwrap() {
        for pc in p["pluginConfig"].as_sequence_mut().into_iter().flatten() {
            if let Some(c) = pc["args"]["component"].as_str() {
                let name = c.strip_prefix(IMAGE_PLUGINS_DIR).unwrap().strip_suffix(".wasm").unwrap();
                pc["args"]["component"] = Value::String(guest(name).display().to_string());
            }
        }
    }
    serde_yaml::to_string(&cfg).unwrap()
}

#[test]
fn the_configmap_configuration_schedules_with_the_built_guests() {
    let dir = std::env::temp_dir().join(format!("kws-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, local_config(&manifests())).unwrap();
    let cluster = dir.join("cluster.yaml");
    std::fs::write(
        &cluster,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: plain\nstatus:\n  allocatable: {cpu: '8', memory: 32Gi, pods: '110'}\n---\n\
         apiVersion: v1\nkind: Node\nmetadata:\n  name: preferred\n  labels: {priority.example.com: '10'}\nstatus:\n  allocatable: {cpu: '8', memory: 32Gi, pods: '110'}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  schedulerName: kube-wasm-scheduler\n  containers: [{name: c, image: pause}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: other\n  namespace: default\nspec:\n  containers: [{name: c, image: pause}]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["simulate", "--output", "json", "--config"])
        .arg(&config)
        .arg("--cluster")
        .arg(&cluster)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let placements = report["placements"].as_array().unwrap();
    assert_eq!(placements.len(), 1, "only the pod for kube-wasm-scheduler is scheduled: {stdout}");
    assert_eq!(placements[0]["pod"], "default/web");
    assert_eq!(placements[0]["profile"], "kube-wasm-scheduler");
    // PriorityLabel scores the labelled node highest (weight 3) and its Filter is off, so the plain node stays
    // feasible; the random score (weight 1) cannot outweigh it.
    assert_eq!(placements[0]["node"], "preferred", "{stdout}");
}

/// The workspace members of a Cargo.toml (`members = [...]`; the test crate has no TOML parser).
fn workspace_members(text: &str) -> Vec<String> {
    let start = text.find("members = [").expect("workspace members") + "members = [".len();
    let list = &text[start..];
    let list = &list[..list.find(']').unwrap()];
    list.split(',').map(|s| s.trim().trim_matches('"').to_string()).filter(|s| !s.is_empty()).collect()
}
