//! The security issue's reproductions through the `picograd` binary, as a user meets them:
//! `run` and `compile` with `TMPDIR` in a folder another user (uid 65534) fills, with
//! `PICOGRAD_CACHE` pointing at a folder that user made and filled with forged entries (correct
//! digests), and with another user's entry planted in the user's own cache; and `--target` given
//! a path. Each run must refuse what was planted and say so, rebuild, give the right answer, run
//! no planted code and leave no build folder behind.

#[path = "../../tests/common/attacker.rs"]
mod attacker;
#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use attacker::{evil_library_source, listing, Attacker};
use picograd_core::{DType, Tensor};
use picograd_onnx::npy;
use picograd_runtime::cache;
use prost::Message;

fn picograd(args: &[&str], tmpdir: &Path, cache_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_picograd"))
        .args(args)
        .env("TMPDIR", tmpdir)
        .env("PICOGRAD_CACHE", cache_dir)
        .env_remove("PICOGRAD_SEARCH")
        .output()
        .expect("the picograd binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The tiny CNN's output on an all-zero input: only the biases flow.
const WANT: [f32; 3] = [0.1, 0.5, -0.4];

fn check_output(out_dir: &Path, what: &str) {
    let y = npy::read(&out_dir.join("y.npy"))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(y.len(), 3, "{what}: {y:?}");
    for (g, w) in y.iter().zip(WANT) {
        assert!((g - w).abs() < 1e-6, "{what}: {y:?}, want {WANT:?}");
    }
}

#[test]
fn run_and_compile_refuse_planted_caches_and_folders() {
    let Some(att) = Attacker::new("run_and_compile_refuse_planted_caches_and_folders") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("tiny.onnx");
    fs::write(&model, common::tiny_cnn().encode_to_vec()).unwrap();
    let x = work.path().join("x.npy");
    npy::write(&x, &Tensor::zeros(&[1, 1, 4, 4], DType::F32)).unwrap();
    let (model, x) = (model.to_str().unwrap(), x.to_str().unwrap());
    // TMPDIR is shared with the attacker, as /tmp is (root's, sticky, writable by all).
    let tmp = att.shared().to_path_buf();
    let marker = att.marker("cli");
    let evil = att.shared().join("evil.so");
    att.plant_library(&evil_library_source(&marker), &evil);
    let evil = fs::read(&evil).unwrap();

    // The entries a run compiles, learned from a clean run with a cache of our own.
    let ours = work.path().join("cache");
    let out = work.path().join("out0");
    let o = picograd(
        &["run", model, "-i", x, "-o", out.to_str().unwrap()],
        &tmp,
        &ours,
    );
    assert!(o.status.success(), "{}", text(&o));
    check_output(&out, "clean run");
    let entries = listing(&ours.join("kernels"));
    assert!(!entries.is_empty());

    // PICOGRAD_CACHE in a folder another user made, holding forged entries under those names.
    let theirs = att.shared().join("their-cache");
    att.plant_dir(&theirs.join("kernels"));
    for name in &entries {
        let key = u128::from_str_radix(&name[..32], 16).unwrap();
        att.plant_file(
            &theirs.join("kernels").join(name),
            &cache::seal(&evil, key),
            0o644,
        );
    }
    // Another user's entry for our own cache folder, and an output folder of theirs.
    att.plant_dir(&att.shared().join("stage"));
    let planted = att.shared().join("stage").join("planted.so");
    let key = u128::from_str_radix(&entries[0][..32], 16).unwrap();
    att.plant_file(&planted, &cache::seal(&evil, key), 0o644);
    let their_out = att.shared().join("their-out");
    att.plant_dir(&their_out);
    let before_tmp = listing(&tmp);
    let out = work.path().join("out1");
    let o = picograd(
        &["run", model, "-i", x, "-o", out.to_str().unwrap()],
        &tmp,
        &theirs,
    );
    assert!(o.status.success(), "{}", text(&o));
    check_output(&out, "planted cache folder");
    assert!(!marker.exists(), "planted code ran: {}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("not using the kernel cache") && said.contains("owned by uid 65534"),
        "{said}"
    );
    assert_eq!(listing(&tmp), before_tmp, "something was left in TMPDIR");

    // Another user's entry inside our own cache folder: set aside, rebuilt.
    let victim_entry = ours.join("kernels").join(&entries[0]);
    fs::rename(&planted, &victim_entry).unwrap();
    let out = work.path().join("out2");
    let o = picograd(
        &["run", model, "-i", x, "-o", out.to_str().unwrap()],
        &tmp,
        &ours,
    );
    assert!(o.status.success(), "{}", text(&o));
    check_output(&out, "planted entry");
    assert!(!marker.exists(), "planted code ran: {}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("set aside") && said.contains("owned by uid 65534"),
        "{said}"
    );

    // `compile` under the planted TMPDIR and the planted cache: refuses, builds in a private
    // folder it removes, gives the right answer (on zeros, the biases).
    let bundle = work.path().join("bundle");
    let args = [
        "compile",
        model,
        "--target",
        "host",
        "--out",
        bundle.to_str().unwrap(),
        // The built bundle on real inputs against the desktop run (exit 1 if they disagree).
        "--input",
        x,
        "--check",
    ];
    let o = picograd(&args, &tmp, &theirs);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("device and desktop agree"),
        "{}",
        text(&o)
    );
    assert!(!marker.exists(), "planted code ran: {}", text(&o));
    assert_eq!(listing(&tmp), before_tmp, "a build folder was left behind");
    // A failed compile leaves none either (a description whose compiler fails).
    let broken = work.path().join("broken");
    fs::create_dir(&broken).unwrap();
    let host = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../targets/host/target.txt"),
    )
    .unwrap();
    fs::write(
        broken.join("target.txt"),
        format!("{host}\ncflags = -fno-such-flag-picograd\n"),
    )
    .unwrap();
    let args = [
        "compile",
        model,
        "--target-dir",
        broken.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
    ];
    let o = picograd(&args, &tmp, &ours);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(
        listing(&tmp),
        before_tmp,
        "a failed build left a folder behind"
    );
    // An output folder another user made is refused, nothing written there.
    let args = ["compile", model, "--out", their_out.to_str().unwrap()];
    let o = picograd(&args, &tmp, &ours);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("owned by uid 65534"), "{}", text(&o));
    assert!(listing(&their_out).is_empty());
    // A TMPDIR another user controls is refused for build folders.
    let their_tmp = att.shared().join("their-tmp");
    att.plant_dir(&their_tmp);
    let args = ["compile", model, "--out", bundle.to_str().unwrap()];
    let o = picograd(&args, &their_tmp, &ours);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("set TMPDIR"), "{}", text(&o));
    assert!(listing(&their_tmp).is_empty());
}

#[test]
fn target_names_are_never_paths() {
    let Some(att) = Attacker::new("target_names_are_never_paths") else {
        return;
    };
    let planted = att.shared().join("x");
    att.plant_dir(&planted);
    let marker = att.marker("target");
    let host = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../targets/host/target.txt"),
    )
    .unwrap();
    let evil = format!("{host}\ncc = touch {}\n", marker.display());
    att.plant_file(&planted.join("target.txt"), evil.as_bytes(), 0o644);
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("tiny.onnx");
    fs::write(&model, common::tiny_cnn().encode_to_vec()).unwrap();
    let depth = Path::new(env!("CARGO_MANIFEST_DIR")).components().count() + 2;
    let sneaky = format!(
        "{}{}",
        "../".repeat(depth),
        planted.strip_prefix("/").unwrap().display()
    );
    for name in [sneaky.as_str(), planted.to_str().unwrap()] {
        let out = work.path().join("out");
        let args = [
            "compile",
            model.to_str().unwrap(),
            "--target",
            name,
            "--out",
            out.to_str().unwrap(),
        ];
        let o = picograd(&args, work.path(), &work.path().join("cache"));
        assert!(!o.status.success(), "{name}: {}", text(&o));
        assert!(text(&o).contains("known targets"), "{name}: {}", text(&o));
    }
    assert!(!marker.exists(), "the planted description's command ran");
}
