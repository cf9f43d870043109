//! The container image's recipe, checked without a container engine (this machine has none):
//! the build stage makes the stripped `dist` binary from a context `.dockerignore` leaves whole
//! for the compile, the runtime stage is a slim base running it unprivileged under tini, and
//! its health check is a command this binary has.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions() -> Vec<String> {
    let text = read("Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#') && !l.is_empty()) {
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn the_image_builds_the_stripped_dist_binary_and_runs_it_unprivileged_with_a_health_check() {
    let steps = instructions();
    let has = |prefix: &str| steps.iter().find(|s| s.starts_with(prefix)).cloned();
    let froms: Vec<&String> = steps.iter().filter(|s| s.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a runtime stage: {froms:?}");
    assert!(froms[1].contains("-slim"), "a minimal runtime base: {}", froms[1]);
    assert!(
        steps.iter().any(|s| s.starts_with("RUN ") && s.contains("cargo build --profile dist --locked --bin hermesd")),
        "{steps:#?}"
    );
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let dist = &manifest["profile"]["dist"];
    assert_eq!(dist["strip"].as_str(), Some("symbols"), "{dist}");
    assert_eq!(dist["lto"].as_str(), Some("fat"), "{dist}");
    assert!(has("COPY --from=build /src/target/dist/hermesd ").is_some(), "{steps:#?}");
    let user = has("USER ").expect("a USER");
    assert!(!user.contains("root") && user != "USER 0", "{user}");
    let entry = has("ENTRYPOINT ").expect("an ENTRYPOINT");
    assert!(entry.contains("tini"), "PID 1 reaps orphans and forwards signals: {entry}");
    let health = has("HEALTHCHECK ").expect("a HEALTHCHECK");
    assert!(health.contains("\"hermesd\", \"health\"") || health.contains("/hermesd\", \"health\""), "{health}");

    // The health check's command is one this binary has, and it fails when nothing answers.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[http]\nlisten = \"127.0.0.1:9\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", home.path().to_str().unwrap(), "health"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Files the compile reads by `include_str!`/`include_bytes!`, under `dir`.
fn included(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            included(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for macro_name in ["include_str!(\"", "include_bytes!(\""] {
                for (at, _) in text.match_indices(macro_name) {
                    let rest = &text[at + macro_name.len()..];
                    let Some(end) = rest.find('"') else { continue };
                    out.push(path.parent().unwrap().join(&rest[..end]));
                }
            }
        }
    }
}

#[test]
fn the_build_context_keeps_what_the_compile_reads_and_no_secret() {
    let ignore = read(".dockerignore");
    let patterns: Vec<&str> = ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for needed in ["target/", ".git/", ".env"] {
        assert!(patterns.contains(&needed), ".dockerignore leaves out {needed}: {patterns:?}");
    }
    let mut files = Vec::new();
    for dir in ["src", "platforms"] {
        included(&root().join(dir), &mut files);
    }
    assert!(files.iter().any(|f| f.to_string_lossy().contains("migrations")), "the migrations are compiled in");
    for file in files {
        let file = file.canonicalize().unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let relative = file.strip_prefix(root().canonicalize().unwrap()).unwrap().to_string_lossy().into_owned();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let excluded =
            relative.starts_with("target/") || relative.starts_with(".git/") || name.contains(".db") || name == ".env";
        assert!(!excluded, "{relative} is compiled in but .dockerignore leaves it out of the build context");
    }
}
