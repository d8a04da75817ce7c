//! `compile --search` on Cortex-M4 under QEMU with one tiny CNN (conv 3×3 pad 1, ReLU, global
//! average pool, linear): the search counts candidates and picks, per kernel, one whose count is
//! at most the size margin over the hand-coded one's in the same build; the searched bundle's outputs are
//! bit-identical to the unsearched bundle's; a second search of the same model reads every
//! choice from the cache and builds nothing under QEMU; a tampered choice file is caught,
//! searched again and rewritten to the same bytes (counts are deterministic).

#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use picograd_cli::compile::SearchOptions;
use picograd_cli::{compile, CompileOptions, CompileReport};
use picograd_onnx::Model;
use picograd_runtime::target::SIZE_MARGIN_PER_MILLE;
use prost::Message;

fn run(model: &Model, out: &std::path::Path, search: Option<SearchOptions>) -> CompileReport {
    let opts = CompileOptions {
        search,
        ..CompileOptions::new("cortex-m4", out)
    };
    compile(model, &opts).unwrap_or_else(|e| panic!("compile: {e}"))
}

#[test]
fn device_search_picks_caches_and_rebuilds_a_tampered_choice() {
    let model = Model::from_bytes(&common::tiny_cnn().encode_to_vec(), "tiny").unwrap();
    let root = picograd_runtime::private_fs::private_temp_dir("picograd-device-search-")
        .unwrap()
        .keep();
    let cache = root.join("choices");
    let search = Some(SearchOptions {
        dir: Some(cache.clone()),
        candidates: Some(2),
    });

    let plain = run(&model, &root.join("plain"), None);
    assert!(plain.search.is_none());

    // First search: every kernel searched, in 1 reference + 2 candidate rounds.
    let first = run(&model, &root.join("s1"), search.clone());
    let s = first.search.as_ref().expect("a search report");
    assert_eq!(s.stats.cached, 0);
    assert_eq!(
        s.stats.rejected_rounds, 0,
        "candidates are order-preserving"
    );
    assert_eq!(s.stats.rounds, 3);
    assert!(s.stats.searched >= 2 && s.stats.searched == s.choices.len() as u64);
    let counted = s.choices.iter().filter(|c| c.hand_instructions.is_some());
    assert!(counted.count() >= 2, "{:?}", s.choices);
    for c in &s.choices {
        // The hand-coded opts are a candidate and the pick is within the size margin of the
        // fastest: it never costs more than the margin over the hand-coded count.
        if let (Some(n), Some(h)) = (c.instructions, c.hand_instructions) {
            assert!(n <= h + h * SIZE_MARGIN_PER_MILLE / 1000, "{c:?}");
        }
    }
    // Bit-identical outputs with and without the search.
    assert_eq!(first.run.outputs, plain.run.outputs);

    // Second search: all from the cache, nothing built or run for the search.
    let second = run(&model, &root.join("s2"), search.clone());
    let s2 = second.search.as_ref().unwrap();
    assert_eq!(s2.stats.rounds, 0, "{:?}", s2.stats);
    assert_eq!(s2.stats.cached, s.choices.len() as u64);
    let opts = |r: &CompileReport| -> Vec<_> {
        let s = r.search.as_ref().unwrap();
        s.choices.iter().map(|c| c.opts.clone()).collect()
    };
    assert_eq!(opts(&second), opts(&first));
    assert_eq!(second.run.outputs, plain.run.outputs);
    assert_eq!(second.run.instructions, first.run.instructions);

    // A tampered choice file: reported, searched again, rewritten as it was.
    let mut files: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len() as u64, s.stats.searched);
    let original = std::fs::read(&files[0]).unwrap();
    let mut bad = original.clone();
    let at = bad.iter().position(|&b| b == b'\n').unwrap() + 5;
    bad[at] ^= 0x01;
    std::fs::write(&files[0], &bad).unwrap();
    let third = run(&model, &root.join("s3"), search);
    let s3 = third.search.as_ref().unwrap();
    assert_eq!(s3.stats.corrupt_rebuilt, 1, "{:?}", s3.stats);
    assert_eq!(s3.stats.searched, 1);
    assert_eq!(s3.stats.cached, s.stats.searched - 1);
    assert!(s3.stats.rounds > 0);
    assert_eq!(std::fs::read(&files[0]).unwrap(), original);
    assert_eq!(third.run.outputs, plain.run.outputs);
    let _ = std::fs::remove_dir_all(&root);
}
