//! Runs one lowered kernel of a schedule item on a fresh interpreter and returns its f32 output
//! as bits, for the tests that compare an optimized lowering with the unoptimized one bit for
//! bit (`pad_bounds.rs`, `small_core_tiles.rs`). Buffer 0 is the output; the item's realized
//! inputs follow in order.

use picograd_core::codegen::uops::LinearKernel;
use picograd_core::device::Device;
use picograd_core::schedule::ScheduleItem;
use picograd_core::Interp;

/// The output of `lk` (lowered from `item`) on the interpreter, as f32 bit patterns.
pub fn run(lk: &LinearKernel, item: &ScheduleItem) -> Vec<u32> {
    let dev = Interp::new();
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
