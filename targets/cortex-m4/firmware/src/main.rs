//! Firmware example: picograd-core on a Cortex-M4F (QEMU mps2-an386). It builds a small lazy graph
//! with `Tensor` — an elementwise product and a sum — realizes it on the interpreter device (the
//! core's default when no std runtime is installed), prints the results over semihosting and
//! exits with success only when they are right.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::mem::MaybeUninit;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use embedded_alloc::LlffHeap as Heap;
use picograd_core::ops::{AluOp, ReduceOp};
use picograd_core::{Result, Tensor};

#[global_allocator]
static HEAP: Heap = Heap::empty();

/// Bytes of RAM given to the allocator (the board has 4 MiB).
const HEAP_BYTES: usize = 1024 * 1024;

/// a * b elementwise and sum(a * b), computed by picograd.
fn compute() -> Result<(Vec<f32>, f32)> {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    let b = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3]);
    let prod = a.try_alu(AluOp::Mul, &[&b])?;
    let sum = prod.try_reduce(ReduceOp::Sum, None, false)?;
    Ok((prod.to_vec::<f32>()?, sum.to_vec::<f32>()?[0]))
}

#[entry]
fn main() -> ! {
    static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];
    // SAFETY: called once, before any allocation; HEAP_MEM is this function's own static.
    unsafe { HEAP.init(HEAP_MEM.as_mut_ptr() as usize, HEAP_BYTES) }

    let ok = match compute() {
        Ok((prod, sum)) => {
            hprintln!("picograd on cortex-m4: a*b = {:?}, sum = {}", prod, sum);
            prod == [4.0, 10.0, 18.0] && sum == 32.0
        }
        Err(e) => {
            hprintln!("picograd error: {}", e);
            false
        }
    };
    if ok {
        hprintln!("firmware ok");
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        hprintln!("firmware FAILED");
        debug::exit(debug::EXIT_FAILURE);
    }
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
