//! Runs one lowered kernel of a schedule item on a fresh interpreter and returns its f32 output
//! as bits, for the tests that compare an optimized lowering with the unoptimized one bit for
//! bit (`pad_bounds.rs`, `small_core_tiles.rs`, `vector_uops.rs`, `looped_remainder.rs`; on
//! another device with `run_on`), and their seeded inputs. Buffer 0 is the output; the item's
//! realized inputs follow in order.

#![allow(dead_code)]

use picograd_core::codegen::uops::LinearKernel;
use picograd_core::device::Device;
use picograd_core::schedule::ScheduleItem;
use picograd_core::Interp;

/// The output of `lk` (lowered from `item`) on the interpreter, as f32 bit patterns.
pub fn run(lk: &LinearKernel, item: &ScheduleItem) -> Vec<u32> {
    run_on(&Interp::new(), lk, item)
}

/// The output of `lk` (lowered from `item`) on `dev`, as f32 bit patterns.
pub fn run_on(dev: &dyn Device, lk: &LinearKernel, item: &ScheduleItem) -> Vec<u32> {
    let mem = dev.allocator();
    let mut ids = vec![mem.alloc(lk.bufs[0].size * 4).unwrap()];
    for b in &item.inputs {
        let bytes = b.realized().unwrap().to_bytes().unwrap();
        let id = mem.alloc(bytes.len()).unwrap();
        mem.copy_in(id, &bytes).unwrap();
        ids.push(id);
    }
    dev.compile(lk).unwrap().run(&ids, &[]).unwrap();
    let mut out = vec![0u8; lk.bufs[0].size * 4];
    mem.copy_out(ids[0], &mut out).unwrap();
    out.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `n` values in `[-1, 1)` in steps of 1/8 (exact in f32, so sums in any order agree often),
/// scrambled by `seed`: the inputs of those comparisons.
pub fn seeded_data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
            (h % 17) as f32 / 8.0 - 1.0
        })
        .collect()
}
