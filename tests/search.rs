//! The measured kernel search (`PICOGRAD_SEARCH`): every candidate of the search space, and every
//! choice the search makes, computes bit-identical results to the unoptimized kernel on awkward
//! sizes; a choice is remembered on disk and reused without searching; a corrupt or foreign
//! choice file is ignored and rebuilt; with the search off, nothing changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use picograd::codegen::kernel::{Kernel, Opt};
use picograd::codegen::lower::buf_params;
use picograd::codegen::lower::lower_ast_with;
use picograd::codegen::opt::OptConfig;
use picograd::codegen::search_space::candidates;
use picograd::device::{Buffer, Device};
use picograd::ops::ReduceOp;
use picograd::runtime::search::Search;
use picograd::runtime::Clang;
use picograd::schedule::{schedule, ScheduleItem};
use picograd::{ConvOpts, Padding, Tensor};

/// Runs `item` lowered with `opts` (`None`: unoptimized) on `dev`; the output bytes.
fn run(item: &ScheduleItem, opts: Option<&[Opt]>, dev: &Arc<dyn Device>) -> Vec<u8> {
    let opts = opts.unwrap_or(&[]);
    let lk = lower_ast_with(&item.ast, buf_params(item), None, Some(opts), false).unwrap();
    let prog = dev.compile(&lk).unwrap();
    let out = Buffer::new(dev.clone(), item.out.dtype(), lk.bufs[0].size).unwrap();
    let ins: Vec<Buffer> = item
        .inputs
        .iter()
        .map(|i| {
            let src = i.realized().expect("inputs of test kernels are realized");
            let b = Buffer::new(dev.clone(), src.dtype(), src.len()).unwrap();
            b.copy_in(&src.to_bytes().unwrap()).unwrap();
            b
        })
        .collect();
    let mut ids = vec![out.id()];
    ids.extend(ins.iter().map(|b| b.id()));
    prog.run(&ids, &[]).unwrap();
    out.to_bytes().unwrap()
}

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37 + (i % 5) as f32 * 1e-3)
        .collect()
}

fn t(shape: &[usize]) -> Tensor {
    Tensor::from_slice(&data(shape.iter().product()), shape)
}

fn single_item(t: &Tensor) -> ScheduleItem {
    let items = schedule(&[t.lazy().contiguous()]).unwrap();
    assert_eq!(items.len(), 1, "expected one kernel");
    items.into_iter().next().unwrap()
}

/// Kernels of awkward sizes (primes, 1, non-multiples of 16), with one, two and three reduce
/// axes, so every unroll plan of the space is exercised.
fn awkward_items() -> Vec<ScheduleItem> {
    picograd::init();
    let mut items = Vec::new();
    for (m, k, n) in [
        (1, 5, 7),
        (13, 17, 19),
        (16, 3, 33),
        (24, 12, 48),
        (1, 64, 1),
    ] {
        items.push(single_item(&t(&[m, k]).matmul(&t(&[k, n]))));
        let bt = t(&[n, k]).transpose(0, 1);
        items.push(single_item(&t(&[m, k]).matmul(&bt).relu()));
    }
    for n in [1, 7, 37, 100, 131] {
        let x = t(&[n]);
        items.push(single_item(&x.mul(2.0).add(1.0).relu().mul(x.sigmoid())));
    }
    // Two reduce axes that cannot merge (a wrong unroll order changes these sums' bits).
    let s = t(&[6, 5, 4])
        .try_reduce(ReduceOp::Sum, Some(&[0, 2]), false)
        .unwrap();
    items.push(single_item(&s));
    let x = t(&[2, 3, 7, 9]);
    let w = t(&[5, 3, 3, 3]);
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    // A padded conv schedules the padding copy first; run it so the conv's inputs exist.
    let mut conv = schedule(&[x.conv2d(&w, None, &opts).relu().lazy().contiguous()]).unwrap();
    let last = conv.pop().unwrap();
    picograd::realize::run_schedule(&conv).unwrap();
    items.push(last);
    items
}

fn clang(threads: usize) -> Clang {
    Clang::new()
        .expect("no C compiler: search tests cannot run")
        .with_threads(threads, 0)
}

fn unoptimized() -> Arc<dyn Device> {
    Arc::new(clang(1).with_opt_config(None).with_search(None))
}

/// A fresh private folder under a random name (nothing another user could plant), removed when
/// the returned guard drops; the choice files go into its `choices` folder, which the search
/// makes.
fn temp_dir(name: &str) -> tempfile::TempDir {
    picograd::runtime::private_fs::private_temp_dir(&format!("picograd-search-{name}-")).unwrap()
}

fn searching(dir: &Path, ms: u64) -> Arc<Clang> {
    // Every kernel is searched, however small: test kernels are tiny.
    let s = Search::new(Duration::from_millis(ms))
        .with_dir(dir)
        .with_min_work(0);
    Arc::new(clang(1).with_search(Some(s)))
}

fn choice_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "choice"));
    v.sort();
    v
}

#[test]
fn every_candidate_keeps_results_on_the_interpreter() {
    let interp = picograd::context::interp();
    for item in awkward_items() {
        let base = run(&item, None, &interp);
        let k = Kernel::new(&item.ast).unwrap();
        for cfg in [OptConfig::for_vec_width(16), OptConfig::small_device()] {
            let cands = candidates(&k, &cfg, 64);
            assert!(!cands.is_empty());
            for opts in &cands {
                assert_eq!(
                    run(&item, Some(opts), &interp),
                    base,
                    "candidate {opts:?} of {}",
                    k.describe()
                );
            }
        }
    }
}

#[test]
fn the_space_starts_with_the_hand_coded_choice_and_holds_none() {
    let item = single_item(&t(&[24, 12]).matmul(&t(&[12, 48])));
    let k = Kernel::new(&item.ast).unwrap();
    let cfg = OptConfig::for_vec_width(8);
    let mut hand_k = k.clone();
    let hand = picograd::codegen::strategy::hand_coded(&mut hand_k, &cfg);
    let cands = candidates(&k, &cfg, 1000);
    assert_eq!(cands[0], hand);
    assert!(cands.iter().any(|c| c.is_empty()), "no-opts candidate");
    assert!(cands.len() > 10, "only {} candidates", cands.len());
    assert_eq!(candidates(&k, &cfg, 5).len(), 5);
    assert!(cands
        .iter()
        .any(|c| c.iter().any(|o| matches!(o, Opt::Unroll { .. }))));
}

/// The search draws from the strategy table: a conv with 12 output channels is offered the conv
/// entry's 6-channel tiles (no power of two and not the whole axis, so the generic register
/// tile never offers them), in both orientations, and each of them keeps results on the
/// interpreter.
#[test]
fn the_search_draws_conv_tiles_from_the_strategy_table() {
    use picograd::codegen::strategy::{Stage, STRATEGIES};
    picograd::init();
    let stages: Vec<Stage> = STRATEGIES.iter().map(|s| s.stage).collect();
    let rank = |s: Stage| match s {
        Stage::Tile => 0,
        Stage::Unroll => 1,
        Stage::Block => 2,
    };
    assert!(
        stages.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
        "the table lists tile strategies before unroll ones, and those before block ones: {stages:?}"
    );
    let x = t(&[1, 4, 6, 6]);
    let w = t(&[12, 4, 3, 3]);
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let mut conv = schedule(&[x.conv2d(&w, None, &opts).lazy().contiguous()]).unwrap();
    let item = conv.pop().unwrap();
    picograd::realize::run_schedule(&conv).unwrap();
    let k = Kernel::new(&item.ast).unwrap();
    assert_eq!(k.describe(), "[12,6,6 | 4,3,3 | ]", "channels are axis 0");
    let cands = candidates(&k, &OptConfig::for_vec_width(4), 100_000);
    let six = Opt::Upcast { axis: 0, amount: 6 };
    assert!(
        cands.iter().any(|c| c.first() == Some(&six)),
        "a 6-channel tile, vectors along x"
    );
    assert!(
        cands.iter().any(|c| c.len() >= 2 && c[1] == six),
        "a 6-channel tile, channels in lanes"
    );
    let interp = picograd::context::interp();
    let base = run(&item, None, &interp);
    // The conv entry's own tiles (the others are checked on awkward sizes above).
    for opts in cands.iter().filter(|c| c.contains(&six)) {
        assert_eq!(run(&item, Some(opts), &interp), base, "candidate {opts:?}");
    }
}

#[test]
fn searched_choices_keep_results_on_awkward_sizes() {
    let dir_tmp = temp_dir("awkward");
    let dir = dir_tmp.path().join("choices");
    let dev = searching(&dir, 30);
    let base_dev = unoptimized();
    let dyn_dev: Arc<dyn Device> = dev.clone();
    for item in awkward_items() {
        let opts = dev
            .choose_opts(&item.ast, &buf_params(&item))
            .expect("the search chooses opts");
        assert_eq!(
            run(&item, Some(&opts), &dyn_dev),
            run(&item, None, &base_dev),
            "searched {opts:?}"
        );
    }
    let stats = dev.search().unwrap().stats();
    assert!(stats.searches >= 10, "{stats:?}");
}

#[test]
fn a_choice_is_remembered_and_reused_without_searching() {
    let dir_tmp = temp_dir("reuse");
    let dir = dir_tmp.path().join("choices");
    let item = single_item(&t(&[24, 12]).matmul(&t(&[12, 48])));
    let bufs = buf_params(&item);
    let first = searching(&dir, 100);
    let chosen = first.choose_opts(&item.ast, &bufs).unwrap();
    let s = first.search().unwrap().stats();
    assert_eq!((s.searches, s.disk_hits), (1, 0), "{s:?}");
    assert!(s.timed >= 1, "{s:?}");
    // The same device again: from memory.
    assert_eq!(first.choose_opts(&item.ast, &bufs), Some(chosen.clone()));
    let s = first.search().unwrap().stats();
    assert_eq!((s.searches, s.memory_hits), (1, 1), "{s:?}");
    assert_eq!(choice_files(&dir).len(), 1);
    // A new search (as in a second process): from the file, no search.
    let second = searching(&dir, 100);
    assert_eq!(second.choose_opts(&item.ast, &bufs), Some(chosen));
    let s = second.search().unwrap().stats();
    assert_eq!((s.searches, s.disk_hits, s.timed), (0, 1, 0), "{s:?}");
}

/// Each way a choice file can go wrong, made from the intact file's bytes (`other` is another
/// kernel's intact choice file).
fn corruptions(intact: &[u8], other: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut flipped = intact.to_vec();
    flipped[intact.len() / 2] ^= 1;
    vec![
        ("flipped bit", flipped),
        ("truncated", intact[..intact.len() - 7].to_vec()),
        ("empty", Vec::new()),
        ("binary", vec![0xff, 0x00, 0x7f, 0x45]),
        ("foreign", other.to_vec()),
    ]
}

#[test]
fn a_corrupt_or_foreign_choice_file_is_rebuilt() {
    let dir_tmp = temp_dir("corrupt");
    let dir = dir_tmp.path().join("choices");
    let other_dir_tmp = temp_dir("corrupt-other");
    let other_dir = other_dir_tmp.path().join("choices");
    let item = single_item(&t(&[13, 17]).matmul(&t(&[17, 19])));
    let other = single_item(&t(&[7]).relu());
    let bufs = buf_params(&item);
    assert!(searching(&dir, 50).choose_opts(&item.ast, &bufs).is_some());
    searching(&other_dir, 50).choose_opts(&other.ast, &buf_params(&other));
    let path = choice_files(&dir).pop().expect("a choice file");
    let intact = std::fs::read(&path).unwrap();
    let foreign = std::fs::read(choice_files(&other_dir).pop().unwrap()).unwrap();
    for (what, bytes) in corruptions(&intact, &foreign) {
        std::fs::write(&path, bytes).unwrap();
        let dev = searching(&dir, 50);
        let again = dev.choose_opts(&item.ast, &bufs);
        let s = dev.search().unwrap().stats();
        assert_eq!(
            (s.corrupt_rebuilt, s.searches, s.disk_hits),
            (1, 1, 0),
            "{what}: {s:?}"
        );
        assert!(again.is_some(), "{what}");
        // The rebuilt file is intact: the next search reads it.
        let next = searching(&dir, 50);
        let reread = next.choose_opts(&item.ast, &bufs);
        let s = next.search().unwrap().stats();
        assert_eq!(
            (s.disk_hits, s.searches),
            (1, 0),
            "{what} after rebuild: {s:?}"
        );
        assert_eq!(reread, again, "{what}");
    }
}

#[path = "../std-runtime/tests/common/attacker.rs"]
mod attacker;

/// A choice file another user planted (valid contents, their file), or a link to one, is never
/// read: it is set aside and the kernel searched again. A choice folder they made is not used.
#[test]
fn a_choice_file_planted_by_another_user_is_not_read() {
    let Some(att) = attacker::Attacker::new("a_choice_file_planted_by_another_user_is_not_read")
    else {
        return;
    };
    let dir_tmp = temp_dir("planted");
    let dir = dir_tmp.path().join("choices");
    let item = single_item(&t(&[13, 17]).matmul(&t(&[17, 19])));
    let bufs = buf_params(&item);
    assert!(searching(&dir, 50).choose_opts(&item.ast, &bufs).is_some());
    let path = choice_files(&dir).pop().expect("a choice file");
    let intact = std::fs::read(&path).unwrap();
    for what in attacker::Swap::ALL {
        att.swap_in(&path, &intact, what);
        let dev = searching(&dir, 50);
        assert!(dev.choose_opts(&item.ast, &bufs).is_some(), "{what:?}");
        let s = dev.search().unwrap().stats();
        assert_eq!(
            (s.corrupt_rebuilt, s.searches, s.disk_hits),
            (1, 1, 0),
            "{what:?}: {s:?}"
        );
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(
            meta.is_file(),
            "{what:?}: the choice was not rewritten as our own file"
        );
    }
    // A choice folder another user made is refused: searched, nothing read or written there.
    let their_dir = att.shared().join("search");
    att.plant_dir(&their_dir);
    let f = their_dir.join(path.file_name().unwrap());
    att.plant_file(&f, &intact, 0o644);
    let dev = searching(&their_dir, 50);
    assert!(dev.choose_opts(&item.ast, &bufs).is_some());
    let search = dev.search().unwrap();
    let s = search.stats();
    assert_eq!((s.searches, s.disk_hits), (1, 0), "{s:?}");
    let why = search.dir_refusal().expect("the folder was refused");
    assert!(why.contains("owned by uid 65534"), "{why}");
    assert_eq!(choice_files(&their_dir), vec![f]);
}

#[test]
fn with_the_search_off_nothing_changes() {
    picograd::init();
    let item = single_item(&t(&[24, 12]).matmul(&t(&[12, 48])));
    let off = clang(1).with_search(None);
    assert!(off.search().is_none());
    assert_eq!(off.choose_opts(&item.ast, &buf_params(&item)), None);
    // Lowering for a device without a search is exactly the hand-coded lowering.
    let cfg = off.opt_config();
    let hand =
        picograd::codegen::lower::lower_ast(&item.ast, buf_params(&item), cfg.as_ref(), false)
            .unwrap();
    let mut k = Kernel::new(&item.ast).unwrap();
    let opts = picograd::codegen::strategy::hand_coded(&mut k, &cfg.unwrap());
    let same = lower_ast_with(
        &item.ast,
        buf_params(&item),
        cfg.as_ref(),
        Some(&opts),
        false,
    )
    .unwrap();
    assert_eq!(hand, same);
}

#[test]
fn realizing_on_a_searching_device_gives_the_unoptimized_bits() {
    let dir_tmp = temp_dir("realize");
    let dir = dir_tmp.path().join("choices");
    let dev = searching(&dir, 50);
    let dyn_dev: Arc<dyn Device> = dev.clone();
    let base = unoptimized();
    let compute = |d: &Arc<dyn Device>| {
        let a = t(&[13, 29]).to_device(d);
        let b = t(&[29, 11]).to_device(d);
        a.matmul(&b).relu().add(1.0).to_vec::<f32>().unwrap()
    };
    let got = compute(&dyn_dev);
    let want = compute(&base);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want));
    let s = dev.search().unwrap().stats();
    assert!(s.searches >= 1, "{s:?}");
}

#[test]
fn kernels_too_small_to_time_are_not_searched() {
    let dir_tmp = temp_dir("small");
    let dir = dir_tmp.path().join("choices");
    let item = single_item(&t(&[7]).relu());
    let s = Search::new(Duration::from_millis(50)).with_dir(&dir);
    let dev = clang(1).with_search(Some(s));
    assert_eq!(dev.choose_opts(&item.ast, &buf_params(&item)), None);
    let s = dev.search().unwrap().stats();
    assert_eq!((s.searches, s.timed), (0, 0), "{s:?}");
    assert!(choice_files(&dir).is_empty());
}
