/*
 * harness.c: the program picograd builds around an exported model bundle to run it on a target.
 *
 * It owns the measuring, not the model: it includes the bundle's `model.h` and a generated
 * `inputs.h` (input arrays, output arrays, and the `HARNESS_RUN()` / `HARNESS_PRINT_OUTPUTS()`
 * macros, written by picograd-runtime's `target` module), paints the stack, runs `model_run`
 * once between two reads of an instruction counter, and prints over stdout (semihosting on
 * devices) in a fixed line format the runtime parses:
 *
 *   output <name> <hex bits> <hex bits> ...   one line per output, every element's bit pattern
 *   instructions: <N>                          when the target has a counter
 *   stack: <N> bytes                           high-water mark of the stack during model_run
 *   status: <S>                                model_run's status, when it returns one (a
 *                                              bundle with run-time dimensions), before its
 *                                              outputs
 *   feed <K>                                   then the outputs (and status) of feed K >= 1,
 *                                              when inputs.h defines HARNESS_MORE_FEEDS()
 *
 * PICOGRAD_STACK_NONE (sanitizer builds) skips the probe and prints no stack line.
 * PICOGRAD_COUNT_RUNS=K (the exact counter's builds, see targets/common/icount.c) calls
 * `model_run` K times (K may be 0) and prints nothing: two programs differing only in K, whose
 * executed instructions the QEMU plugin counts, give (count(K) - count(0)) / K per inference. K
 * is a volatile variable, so both programs have the same code.
 * Then it returns 0 (QEMU's exit status on devices). Counters, chosen by the target description:
 *   PICOGRAD_COUNTER_MINSTRET  RISC-V: exact retired instructions (qemu -icount shift=0)
 *   PICOGRAD_COUNTER_SYSTICK   Cortex-M: SysTick at 25 MHz under -icount shift=0 = 1 ns per
 *                              instruction, so ticks x 40 ~ instructions; the 24-bit wrap is
 *                              counted by the SysTick interrupt
 * Stack probe: PICOGRAD_STACK_LINKER paints from the linker's end of .bss (picolibc's `__end`)
 * up to the stack pointer at the call of `model_run`; otherwise a fixed window below it is
 * pre-touched (so the pages exist) and painted. The figure is the distance from that stack
 * pointer down to the lowest word no longer painted: `model_run`'s own stack, not main's frame.
 * The paint is written by main itself, whose stack pointer does not move between the paint and
 * the call (nothing is called in between: the counter reads are inlined).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "inputs.h"

#define PAINT_WORD 0xC5A5C5A5u
#define PAINT_MAX_BYTES (256u * 1024u)
#define PAINT_MARGIN 64u

/* ---- instruction counter ---- */

#if defined(PICOGRAD_COUNTER_MINSTRET)
#define HAVE_COUNTER 1
static inline __attribute__((always_inline)) uint64_t counter_read(void)
{
    uint32_t hi, lo, hi2;
    do {
        /* csrrs rd, csr, x0 spelled as .insn: no zicsr in -march needed (it would change
         * picolibc's multilib choice). CSR 0xB02 = minstret, 0xB82 = minstreth, written as the
         * signed 12-bit immediates .insn wants (0xB02 - 4096 = -1278, 0xB82 - 4096 = -1150). */
        __asm__ volatile(".insn i 0x73, 2, %0, x0, -1150" : "=r"(hi));
        __asm__ volatile(".insn i 0x73, 2, %0, x0, -1278" : "=r"(lo));
        __asm__ volatile(".insn i 0x73, 2, %0, x0, -1150" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}
static void counter_start(void) {}
static uint64_t counter_scale(uint64_t n) { return n; }
#elif defined(PICOGRAD_COUNTER_SYSTICK)
#define HAVE_COUNTER 1
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
static volatile uint32_t systick_wraps;
/* Overrides picolibc's weak handler in its vector table. */
void arm_systick_isr(void);
void arm_systick_isr(void) { systick_wraps++; }
static void counter_start(void)
{
    SYST_CSR = 0;
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    systick_wraps = 0;
    SYST_CSR = 7u; /* enable, interrupt on wrap, processor clock */
}
/* Elapsed ticks as a monotonic 64-bit number: wraps x 2^24 + (reload - current). */
static inline __attribute__((always_inline)) uint64_t counter_read(void)
{
    uint32_t w, v;
    do {
        w = systick_wraps;
        v = SYST_CVR;
    } while (w != systick_wraps);
    return ((uint64_t)w << 24) + (0x00FFFFFFu - (v & 0x00FFFFFFu));
}
static uint64_t counter_scale(uint64_t n) { return n * 40u; }
#else
#define HAVE_COUNTER 0
#endif

/* ---- stack high-water mark ---- */

#if !defined(PICOGRAD_STACK_NONE) && !defined(PICOGRAD_COUNT_RUNS)
#define HAVE_STACK_PROBE 1

/* The stack pointer of the function it is inlined into. */
static inline __attribute__((always_inline)) uintptr_t stack_pointer(void)
{
    uintptr_t sp;
#if defined(__arm__) || defined(__aarch64__)
    __asm__ volatile("mov %0, sp" : "=r"(sp));
#elif defined(__riscv)
    __asm__ volatile("mv %0, sp" : "=r"(sp));
#elif defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#else
    /* Another host: a local's address, within main's frame (the figure then includes part of
     * that frame). */
    volatile uintptr_t here = 0;
    sp = (uintptr_t)&here;
#endif
    return sp;
}

#if defined(PICOGRAD_STACK_LINKER)
extern char __end[]; /* picolibc.ld: end of .bss, start of the free RAM below the stack */
#else
/* Makes sure the pages of the window exist before they are painted through a pointer. */
static __attribute__((noinline)) void touch_window(void)
{
    volatile uint8_t window[PAINT_MAX_BYTES + 2u * PAINT_MARGIN];
    size_t i;
    for (i = 0; i < sizeof(window); i += 512u) {
        window[i] = 0;
    }
}
#endif

/* The lowest address to paint below `sp`: the end of .bss, or a fixed window. */
static uintptr_t paint_floor(uintptr_t sp)
{
    uintptr_t lo = (sp - PAINT_MAX_BYTES) & ~(uintptr_t)3u;
#if defined(PICOGRAD_STACK_LINKER)
    uintptr_t end = ((uintptr_t)__end + 3u) & ~(uintptr_t)3u;
    if (sp - end < PAINT_MAX_BYTES) {
        lo = end;
    }
#endif
    return lo;
}

/* Bytes between `sp` and the lowest word from `lo` up that no longer holds the paint. */
static uint32_t stack_used(uintptr_t lo, uintptr_t sp)
{
    uintptr_t p = lo;
    while (p < sp && *(volatile uint32_t *)p == PAINT_WORD) {
        p += 4u;
    }
    return (uint32_t)(sp - p);
}
#else
#define HAVE_STACK_PROBE 0
#endif

/* ---- printing ---- */

#if HAVE_COUNTER
static void print_u64(uint64_t n)
{
    char buf[24];
    int i = (int)sizeof(buf) - 1;
    buf[i] = '\0';
    do {
        buf[--i] = (char)('0' + (int)(n % 10u));
        n /= 10u;
    } while (n != 0u && i > 0);
    fputs(&buf[i], stdout);
}
#endif

/* Prints `n` elements of `itemsize` bytes each as hex bit patterns (2 x itemsize digits). */
void harness_print(const char *name, const void *data, size_t n, size_t itemsize);
void harness_print(const char *name, const void *data, size_t n, size_t itemsize)
{
    const uint8_t *bytes = (const uint8_t *)data;
    size_t i;
    printf("output %s", name);
    for (i = 0; i < n; i++) {
        uint64_t v = 0;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        switch (itemsize) {
        case 1: memcpy(&u8, bytes + i, 1); v = u8; break;
        case 2: memcpy(&u16, bytes + 2u * i, 2); v = u16; break;
        case 4: memcpy(&u32, bytes + 4u * i, 4); v = u32; break;
        default: memcpy(&v, bytes + 8u * i, 8); break;
        }
        if (itemsize == 8u) {
            printf(" %08lx%08lx", (unsigned long)(v >> 32), (unsigned long)(v & 0xFFFFFFFFu));
        } else {
            printf(" %0*lx", (int)(2u * itemsize), (unsigned long)v);
        }
    }
    printf("\n");
}

#if defined(PICOGRAD_COUNT_RUNS)
/* Volatile, so the programs with K runs and with none have the same code; K + 1, never 0, so
 * both keep it in .data (a zero would move it to .bss and change the start-up code's work). */
static volatile uint32_t harness_runs_plus_one = PICOGRAD_COUNT_RUNS + 1u;

int main(void)
{
    uint32_t i;
    for (i = 0; i + 1u < harness_runs_plus_one; i++) {
        HARNESS_RUN();
    }
    return 0;
}
#else
int main(void)
{
#if HAVE_STACK_PROBE
    uintptr_t sp, lo, p;
    uint32_t used;
#endif
#if HAVE_COUNTER
    uint64_t t0, t1, overhead;
    counter_start();
    t0 = counter_read();
    t1 = counter_read();
    overhead = t1 - t0;
#endif
#if HAVE_STACK_PROBE
#if !defined(PICOGRAD_STACK_LINKER)
    touch_window();
#endif
    sp = stack_pointer();
    lo = paint_floor(sp);
    for (p = lo; p < sp; p += 4u) {
        *(volatile uint32_t *)p = PAINT_WORD;
    }
#endif
#if HAVE_COUNTER
    t0 = counter_read();
#endif
    HARNESS_RUN();
#if HAVE_COUNTER
    t1 = counter_read();
#endif
#if HAVE_STACK_PROBE
    used = stack_used(lo, sp);
#endif
    HARNESS_PRINT_OUTPUTS();
#if HAVE_COUNTER
    fputs("instructions: ", stdout);
    print_u64(counter_scale(t1 - t0 > overhead ? t1 - t0 - overhead : 0u));
    fputs("\n", stdout);
#endif
#if HAVE_STACK_PROBE
    printf("stack: %lu bytes\n", (unsigned long)used);
#endif
#if defined(HARNESS_MORE_FEEDS)
    HARNESS_MORE_FEEDS();
#endif
    return 0;
}
#endif
