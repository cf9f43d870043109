//! File tool tests on a temporary workdir, with a fixed-answer `Human` for the approval paths.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::agent::tools::test_support::{self, FixedHuman};
use crate::agent::tools::{Human, Nobody};

struct Fixture {
    ctx: ToolContext,
    work: PathBuf,
    outside: PathBuf,
    _dir: tempfile::TempDir,
}

async fn fixture(human: Arc<dyn Human>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (work, outside) = (dir.path().join("work"), dir.path().join("outside"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let ctx = test_support::context(dir.path(), work.clone(), dir.path().join("data"), human).await;
    Fixture { ctx, work, outside, _dir: dir }
}

fn human(answer: Approval) -> Arc<FixedHuman> {
    Arc::new(FixedHuman { answer, asked: Mutex::new(Vec::new()) })
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn run(tool: &dyn Tool, f: &Fixture, args: Value) -> Result<String, ToolError> {
    tool.call(&f.ctx, args).await
}

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let f = fixture(Arc::new(Nobody)).await;
    let text: String = (1..=12).map(|n| format!("line {n}\n")).collect();
    write(&f.work.join("a.txt"), &text);
    let out = run(&ReadFileTool::new(), &f, json!({"path": "a.txt", "offset": 10, "limit": 2})).await.unwrap();
    assert_eq!(out, "   10|line 10\n   11|line 11\n[lines 10-11 of 12; continue with offset=12]");
    let all = run(&ReadFileTool::new(), &f, json!({"path": "./sub/../a.txt"})).await.unwrap();
    assert!(all.starts_with("    1|line 1\n") && all.ends_with("   12|line 12"), "{all}");
    let past = run(&ReadFileTool::new(), &f, json!({"path": "a.txt", "offset": 40})).await.unwrap_err();
    assert!(past.to_string().contains("a.txt has 12 lines"), "{past}");
    write(&f.work.join("empty.txt"), "");
    assert_eq!(run(&ReadFileTool::new(), &f, json!({"path": "empty.txt"})).await.unwrap(), "empty.txt is empty");
}

#[tokio::test]
async fn read_refuses_binary_huge_missing_dirs_and_secrets() {
    let f = fixture(Arc::new(Nobody)).await;
    std::fs::write(f.work.join("bin"), b"ab\0cd").unwrap();
    std::fs::File::create(f.work.join("big.log")).unwrap().set_len(11 * 1024 * 1024).unwrap();
    for secret in [".env", "id_rsa", "server.pem", "tls.key", ".ssh/config", "credentials.json"] {
        write(&f.work.join(secret), "TOKEN=hunter2");
    }
    let cases = [
        ("bin", "looks binary"),
        ("big.log", "over the 10 MB limit"),
        ("nope.txt", "nope.txt does not exist"),
        (".", "is a directory"),
        (".env", "looks like a secret file"),
        ("id_rsa", "secret"),
        ("server.pem", "secret"),
        ("tls.key", "secret"),
        (".ssh/config", "secret"),
        ("credentials.json", "secret"),
    ];
    for (path, needle) in cases {
        let err = run(&ReadFileTool::new(), &f, json!({"path": path})).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{path}: {err}");
        assert!(!err.contains("hunter2"));
    }
}

#[cfg(unix)]
#[tokio::test]
async fn read_refuses_a_symlink_to_a_secret() {
    let f = fixture(Arc::new(Nobody)).await;
    write(&f.outside.join(".ssh/id_ed25519"), "KEY");
    std::os::unix::fs::symlink(f.outside.join(".ssh/id_ed25519"), f.work.join("notes.txt")).unwrap();
    let err = run(&ReadFileTool::new(), &f, json!({"path": "notes.txt"})).await.unwrap_err();
    assert!(matches!(err, ToolError::Denied(_)) && err.to_string().contains("leads outside the workdir"), "{err}");
    // A link inside the workdir to a secret inside it is judged by its target.
    write(&f.work.join(".ssh/id_ed25519"), "KEY");
    std::os::unix::fs::symlink(".ssh/id_ed25519", f.work.join("readme.txt")).unwrap();
    let err = run(&ReadFileTool::new(), &f, json!({"path": "readme.txt"})).await.unwrap_err();
    assert!(err.to_string().contains("looks like a secret"), "{err}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_swapped_in_after_the_check_still_cannot_escape() {
    let f = fixture(Arc::new(Nobody)).await;
    write(&f.outside.join("secret.txt"), "OUTSIDE");
    write(&f.work.join("notes.txt"), "mine");
    std::fs::create_dir(f.work.join("dir")).unwrap();
    let wd = Workdir::open(&f.work).unwrap();
    let (file, dir) = (resolve(&wd, "notes.txt").unwrap(), resolve(&wd, "dir/new.txt").unwrap());
    // Between the check and the use, both are swapped for symlinks out of the workdir.
    std::fs::remove_file(f.work.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.work.join("notes.txt")).unwrap();
    std::fs::remove_dir(f.work.join("dir")).unwrap();
    std::os::unix::fs::symlink(&f.outside, f.work.join("dir")).unwrap();
    let err = read_text(&wd, &file, false).unwrap_err();
    assert!(err.to_string().contains("leads outside the workdir"), "{err}");
    let err = wd.write_atomic(&dir.rel, b"x").unwrap_err();
    assert!(is_escape(&err), "{err}");
    assert!(!f.outside.join("new.txt").exists());
}

#[tokio::test]
async fn write_creates_parents_atomically_inside_the_workdir() {
    let f = fixture(Arc::new(Nobody)).await;
    let out = run(&WriteFileTool::default(), &f, json!({"path": "a/b/c.txt", "content": "hi\nthere\n"})).await.unwrap();
    assert_eq!(out, "created a/b/c.txt (9 bytes, 2 lines)");
    assert_eq!(std::fs::read_to_string(f.work.join("a/b/c.txt")).unwrap(), "hi\nthere\n");
    let again = run(&WriteFileTool::default(), &f, json!({"path": "a/b/c.txt", "content": "x"})).await.unwrap();
    assert!(again.starts_with("replaced"), "{again}");
    let names: Vec<_> = std::fs::read_dir(f.work.join("a/b")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["c.txt"], "no temporary file left behind");
}

#[tokio::test]
async fn paths_outside_the_workdir_are_refused_without_asking() {
    let who = human(Approval::Approved);
    let f = fixture(who.clone()).await;
    write(&f.outside.join("o.txt"), "OUTSIDE");
    let absolute = f.outside.join("o.txt").display().to_string();
    for path in ["../outside/x.txt", "sub/../../outside/x.txt", absolute.as_str(), "/etc/hostname"] {
        let err = run(&WriteFileTool::default(), &f, json!({"path": path, "content": "x"})).await.unwrap_err();
        assert!(
            matches!(err, ToolError::Denied(_)) && err.to_string().contains("outside the workdir"),
            "{path}: {err}"
        );
        let err = run(&ReadFileTool::new(), &f, json!({"path": path})).await.unwrap_err();
        assert!(err.to_string().contains("outside the workdir"), "{path}: {err}");
    }
    assert!(!f.outside.join("x.txt").exists());
    assert!(who.asked.lock().unwrap().is_empty(), "nothing outside is even offered for approval");
    let inside = f.work.join("in.txt").display().to_string();
    run(&WriteFileTool::default(), &f, json!({"path": inside, "content": "ok"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(f.work.join("in.txt")).unwrap(), "ok");
}

#[tokio::test]
async fn writes_to_secret_files_need_approval() {
    for (answer, needle) in [(Approval::Unavailable, "nobody can approve"), (Approval::Denied, "the user denied")] {
        let who = human(answer);
        let f = fixture(who.clone()).await;
        let err = run(&WriteFileTool::default(), &f, json!({"path": ".env", "content": "A=1"})).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{answer:?}: {err}");
        assert!(!f.work.join(".env").exists());
        assert_eq!(who.asked.lock().unwrap().as_slice(), ["write to a secret file: .env"]);
    }
    let f = fixture(human(Approval::Approved)).await;
    run(&WriteFileTool::default(), &f, json!({"path": ".env", "content": "A=1"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(f.work.join(".env")).unwrap(), "A=1");
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_out_of_the_workdir_counts_as_outside() {
    let who = human(Approval::Denied);
    let f = fixture(who.clone()).await;
    std::os::unix::fs::symlink(&f.outside, f.work.join("link")).unwrap();
    let err = run(&WriteFileTool::default(), &f, json!({"path": "link/z.txt", "content": "x"})).await.unwrap_err();
    assert!(matches!(err, ToolError::Denied(_)), "{err}");
    assert!(!f.outside.join("z.txt").exists());
}

#[tokio::test]
async fn search_finds_substrings_and_skips_noise() {
    let f = fixture(Arc::new(Nobody)).await;
    write(&f.work.join("src/main.rs"), "fn main() {\n    needle();\n}\n");
    write(&f.work.join("src/lib.rs"), "// needle here\n");
    write(&f.work.join("README.md"), "a needle in docs\n");
    write(&f.work.join("Needle.txt"), "NEEDLE is not a match\n");
    for skipped in [".git/config", "target/x.rs", "node_modules/y.rs", ".hidden/z.rs", ".env"] {
        write(&f.work.join(skipped), "needle\n");
    }
    std::fs::write(f.work.join("blob.bin"), b"needle\0").unwrap();
    let tool = SearchFilesTool::new();
    let out = run(&tool, &f, json!({"pattern": "needle"})).await.unwrap();
    assert_eq!(out, "README.md:1: a needle in docs\nsrc/lib.rs:1: // needle here\nsrc/main.rs:2: needle();");
    let rs = run(&tool, &f, json!({"pattern": "needle", "glob": "*.rs", "path": "src"})).await.unwrap();
    assert_eq!(rs.lines().count(), 2, "{rs}");
    let one = run(&tool, &f, json!({"pattern": "needle", "limit": 1})).await.unwrap();
    assert!(one.starts_with("README.md:1:") && one.contains("stopped at 1 hits"), "{one}");
    let none = run(&tool, &f, json!({"pattern": "haystack"})).await.unwrap();
    assert!(none.starts_with("no matches in"), "{none}");
    let file = run(&tool, &f, json!({"pattern": "main", "path": "src/main.rs"})).await.unwrap();
    assert_eq!(file, "src/main.rs:1: fn main() {");
}

#[tokio::test]
async fn patch_replaces_exactly_once_or_all() {
    let f = fixture(Arc::new(Nobody)).await;
    let path = f.work.join("a.rs");
    write(&path, "let a = 1;\nlet b = 2;\nlet c = 2;\n");
    let tool = PatchTool::default();
    let out = run(&tool, &f, json!({"path": "a.rs", "old": "b = 2", "new": "b = 3"})).await.unwrap();
    assert_eq!(out, "patched a.rs: 1 replacement (line 2)\n-b = 2\n+b = 3");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "let a = 1;\nlet b = 3;\nlet c = 2;\n");
    let twice = run(&tool, &f, json!({"path": "a.rs", "old": "let", "new": "const"})).await.unwrap_err();
    assert!(twice.to_string().contains("occurs 3 times in a.rs"), "{twice}");
    let missing = run(&tool, &f, json!({"path": "a.rs", "old": "zzz", "new": "y"})).await.unwrap_err();
    assert!(missing.to_string().contains("was not found in a.rs"), "{missing}");
    let same = run(&tool, &f, json!({"path": "a.rs", "old": "let", "new": "let"})).await.unwrap_err();
    assert!(matches!(same, ToolError::InvalidArguments(_)));
    let all = run(&tool, &f, json!({"path": "a.rs", "old": "let", "new": "const", "replace_all": true})).await;
    assert!(all.unwrap().starts_with("patched a.rs: 3 replacements (line 1, 2, 3)"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "const a = 1;\nconst b = 3;\nconst c = 2;\n");
}

#[cfg(unix)]
#[tokio::test]
async fn patch_keeps_permissions_and_refuses_outside_the_workdir() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture(Arc::new(Nobody)).await;
    let script = f.work.join("run.sh");
    write(&script, "echo old\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    run(&PatchTool::default(), &f, json!({"path": "run.sh", "old": "old", "new": "new"})).await.unwrap();
    assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o755);

    write(&f.outside.join("o.txt"), "old\n");
    let args = json!({"path": f.outside.join("o.txt"), "old": "old", "new": "new"});
    let err = run(&PatchTool::default(), &f, args).await.unwrap_err();
    assert!(err.to_string().contains("outside the workdir"), "{err}");
    assert_eq!(std::fs::read_to_string(f.outside.join("o.txt")).unwrap(), "old\n");
}

#[test]
fn helpers() {
    assert_eq!(normalise(Path::new("/a/./b/../c")), Path::new("/a/c"));
    assert_eq!(normalise(Path::new("/../../x")), Path::new("/x"));
    for (glob, name, expect) in [
        ("*.rs", "main.rs", true),
        ("*.rs", "main.rsx", false),
        ("test_*", "test_a.py", true),
        ("*conf*", "my.config", true),
        ("a*b*c", "abc", true),
        ("a*b*c", "acb", false),
        ("Cargo.toml", "Cargo.toml", true),
        ("ab*ba", "aba", false),
    ] {
        assert_eq!(search::glob_match(glob, name), expect, "{glob} vs {name}");
    }
    for secret in [".env", ".env.local", "a/id_rsa.pub", "x.PEM", "home/.ssh/known_hosts", "credentials", ".netrc"] {
        assert!(is_secret_path(Path::new(secret)), "{secret}");
    }
    for plain in [".env.example", "env.rs", "keys.rs", "src/key.rs.bak", "README.md"] {
        assert!(!is_secret_path(Path::new(plain)), "{plain}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn read_sees_this_chats_media_and_nothing_of_other_chats() {
    let f = fixture(Arc::new(Nobody)).await;
    // The fixture's chat is ("api", "c"); its files are under <data>/media/api/c.
    let media = f._dir.path().join("data/media/api");
    write(&media.join("c/p1_note.txt"), "sent in this chat");
    write(&media.join("other/p2_secret.txt"), "another chat's file");
    write(&f.work.join("media/own.txt"), "the workdir's own media folder");
    std::os::unix::fs::symlink("../other/p2_secret.txt", media.join("c/link.txt")).unwrap();
    std::os::unix::fs::symlink(media.join("other"), media.join("c/dir")).unwrap();

    let out = run(&ReadFileTool::new(), &f, json!({"path": "media/p1_note.txt"})).await.unwrap();
    assert_eq!(out, "    1|sent in this chat");
    let out = run(&ReadFileTool::new(), &f, json!({"path": "./media/own.txt"})).await.unwrap();
    assert_eq!(out, "    1|the workdir's own media folder", "what the view lacks comes from the workdir");

    let other = media.join("other/p2_secret.txt").display().to_string();
    for path in [
        "media/link.txt",
        "media/dir/p2_secret.txt",
        "media/../other/p2_secret.txt",
        "media/p1_note.txt/../../other/p2_secret.txt",
        "media/../../data/media/api/other/p2_secret.txt",
        other.as_str(),
    ] {
        let result = run(&ReadFileTool::new(), &f, json!({"path": path})).await;
        let text = match result {
            Ok(text) => text,
            Err(e) => e.to_string(),
        };
        assert!(!text.contains("another chat's file"), "{path}: {text}");
    }
    // Writes never go to the view: `media/` in a write is the workdir's.
    run(&WriteFileTool::default(), &f, json!({"path": "media/p1_note.txt", "content": "mine"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(media.join("c/p1_note.txt")).unwrap(), "sent in this chat");
}
