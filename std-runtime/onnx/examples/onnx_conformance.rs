//! Runs the ONNX backend node tests (a directory of `<test>/model.onnx` plus
//! `test_data_set_N/{input,output}_M.pb`) through picograd's ONNX importer and prints pass /
//! fail / skip by operator and by family, and the overall pass rate (passed / all tests; skips
//! count as not passed). Usage: `onnx_conformance NODE_DIR [REPORT.md]`. Driven by
//! `scripts/onnx-conformance.sh`, which makes the test data from the installed `onnx` package.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use picograd_core::Tensor;
use picograd_onnx::{ops, proto::TensorProto, values::tensor_from_proto, Model};
use prost::Message;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

fn read_pb(p: &Path) -> Result<TensorProto, String> {
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    TensorProto::decode(bytes.as_slice()).map_err(|e| format!("not a TensorProto: {e}"))
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = (0..64)
        .map(|i| dir.join(format!("{prefix}_{i}.pb")))
        .take_while(|p| p.exists())
        .collect();
    v.sort();
    v
}

/// Do `got` and `want` agree (shape, dtype, values within rtol 1e-3 / atol 1e-7)?
fn compare(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {}, expected {}", got.dtype(), want.dtype()));
    }
    let g = got.to_f64_vec().map_err(|e| e.to_string())?;
    let w = want.to_f64_vec().map_err(|e| e.to_string())?;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-7 + 1e-3 * b.abs();
        if !same {
            return Err(format!("value {i}: {a}, expected {b}"));
        }
    }
    Ok(())
}

fn run_case(dir: &Path) -> (Outcome, String, String) {
    let model = match Model::load(&dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return (skip_or_fail(&e.to_string()), "?".into(), e.to_string()),
    };
    let nodes: Vec<String> = model.nodes().map(|n| n.op_type.clone()).collect();
    let op = if nodes.len() == 1 {
        nodes[0].clone()
    } else {
        "(multi-node)".into()
    };
    if model
        .inputs()
        .iter()
        .chain(model.outputs())
        .any(|v| v.elem_type == 0)
    {
        return (
            Outcome::Skip,
            op,
            "non-tensor input or output (sequence/optional/map)".into(),
        );
    }
    let bad = model.unsupported();
    if !bad.is_empty() {
        let mut names: Vec<String> = bad.iter().map(|u| u.op.clone()).collect();
        names.dedup();
        return (
            Outcome::Skip,
            op,
            format!("unsupported op: {}", names.join(", ")),
        );
    }
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    for set in sets {
        if let Err((o, why)) = run_set(&model, &set) {
            return (o, op, why);
        }
    }
    (Outcome::Pass, op, String::new())
}

fn skip_or_fail(msg: &str) -> Outcome {
    if msg.contains("unsupported") {
        Outcome::Skip
    } else {
        Outcome::Fail
    }
}

fn run_set(model: &Model, set: &Path) -> Result<(), (Outcome, String)> {
    let load = |p: &PathBuf| -> Result<Tensor, (Outcome, String)> {
        let t = read_pb(p).map_err(|e| (Outcome::Skip, format!("non-tensor test data: {e}")))?;
        tensor_from_proto(&t, "test data")
            .map_err(|e| (skip_or_fail(&e.to_string()), e.to_string()))
    };
    let inputs = files(set, "input")
        .iter()
        .map(load)
        .collect::<Result<Vec<_>, _>>()?;
    let wants = files(set, "output")
        .iter()
        .map(load)
        .collect::<Result<Vec<_>, _>>()?;
    let named: Vec<(String, Tensor)> = model
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(s, t)| (s.name.clone(), t))
        .collect();
    let outs = model
        .run_named(&named)
        .map_err(|e| (skip_or_fail(&e.to_string()), e.to_string()))?;
    for (k, (g, w)) in outs.iter().zip(&wants).enumerate() {
        compare(g, w).map_err(|e| (Outcome::Fail, format!("output {k}: {e}")))?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(root) = args.get(1).map(PathBuf::from) else {
        eprintln!("usage: onnx_conformance NODE_DIR [REPORT.md]");
        std::process::exit(2);
    };
    let filter = std::env::var("ONNX_FILTER").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.retain(|d| d.join("model.onnx").exists() && d.to_string_lossy().contains(&filter));
    dirs.sort();
    std::panic::set_hook(Box::new(|_| {}));
    // A bar on a terminal; in a log (no terminal: the bar hides itself) a line every 200 tests.
    let bar = indicatif::ProgressBar::new(dirs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("  node tests [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let name = d
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let r = std::panic::catch_unwind(|| run_case(d))
            .unwrap_or_else(|_| (Outcome::Fail, "?".into(), "panicked".into()));
        if std::env::var("ONNX_VERBOSE").is_ok() && r.0 != Outcome::Pass {
            eprintln!("{name}: {:?} {}", r.0, r.2);
        }
        bar.inc(1);
        bar.set_message(name.clone());
        if bar.is_hidden() && i % 200 == 199 {
            eprintln!("... {} / {} tests", i + 1, dirs.len());
        }
        rows.push((name, r));
    }
    bar.finish_and_clear();
    report(&rows, args.get(2).map(PathBuf::from));
}

type Row = (String, (Outcome, String, String));

fn report(rows: &[Row], out: Option<PathBuf>) {
    let mut by_op: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut by_family: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut text = String::new();
    for (_, (o, op, _)) in rows {
        let fam = ops::family(op).unwrap_or(if op == "(multi-node)" {
            "multi-node"
        } else {
            "unsupported"
        });
        let k = *o as usize;
        by_op.entry(op.clone()).or_default()[k] += 1;
        by_family.entry(fam.to_string()).or_default()[k] += 1;
    }
    text.push_str("| family | pass | fail | skip |\n| --- | --- | --- | --- |\n");
    for (f, c) in &by_family {
        text.push_str(&format!("| {f} | {} | {} | {} |\n", c[0], c[1], c[2]));
    }
    text.push_str("\n| operator | pass | fail | skip |\n| --- | --- | --- | --- |\n");
    for (op, c) in &by_op {
        text.push_str(&format!("| {op} | {} | {} | {} |\n", c[0], c[1], c[2]));
    }
    text.push_str("\n## Not passed\n\n| test | outcome | reason |\n| --- | --- | --- |\n");
    for (name, (o, _, why)) in rows.iter().filter(|r| r.1 .0 != Outcome::Pass) {
        let why: String = why.replace('|', "/").chars().take(160).collect();
        text.push_str(&format!("| {name} | {o:?} | {why} |\n"));
    }
    let total = rows.len();
    let pass = rows.iter().filter(|r| r.1 .0 == Outcome::Pass).count();
    let fail = rows.iter().filter(|r| r.1 .0 == Outcome::Fail).count();
    let skip = total - pass - fail;
    let rate = if total == 0 {
        0.0
    } else {
        100.0 * pass as f64 / total as f64
    };
    let summary = format!("onnx node tests: {pass} passed, {fail} failed, {skip} skipped of {total}; pass rate {rate:.1}%");
    if let Some(p) = out {
        let _ = std::fs::write(p, format!("{summary}\n\n{text}"));
    }
    let head: String = text
        .split("\n## Not passed")
        .next()
        .unwrap_or("")
        .to_string();
    println!("{head}\n{summary}\nPASS_RATE={rate:.1}");
}
