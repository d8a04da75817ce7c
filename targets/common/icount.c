/*
 * icount.c: picograd's QEMU TCG plugin counting executed guest instructions, exactly and
 * deterministically (the emulator's translation blocks, not host time).
 *
 * It owns counting, nothing else: every instruction of every executed translation block is added
 * to a total, and each instruction whose address falls in one of the `range=LO:HI` arguments
 * ([LO, HI), hexadecimal or decimal, up to MAX_RANGES of them: e.g. one per kernel symbol from
 * `nm -S`) is added to that range's count. Counts are kept by QEMU's inline add operations (no
 * callback per block or instruction), so counting costs little emulation speed. At exit it
 * writes, through qemu_plugin_outs (QEMU's log: `-d plugin`, to a file with `-D FILE`):
 *
 *   insns=<total>
 *   range <lo> <hi> <count>        one line per range argument, in the order given
 *
 * Invariant: the total equals that of the reference counter in ../shared/tools/qemu-icount
 * (icnt.c, a callback per translation block adding its instruction count); picograd-runtime's
 * test `icount` checks it on a bundle. Ranges never overlap in use (kernel symbols); an address in
 * two ranges counts in the first only.
 *
 * The few plugin-API declarations it needs are written here (no qemu-plugin.h on Debian);
 * API_VERSION 1 is QEMU 7.2's. Build: cc -O2 -shared -fPIC -o libicount.so icount.c
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef API_VERSION
#define API_VERSION 1
#endif
#define MAX_RANGES 512

typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct {
        int min, cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus, max_vcpus;
        } system;
    };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*atexit_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, enum qemu_plugin_op, void *,
                                              uint64_t);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *, enum qemu_plugin_op,
                                                void *, uint64_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, atexit_cb, void *);
void qemu_plugin_outs(const char *);

__attribute__((visibility("default"))) int qemu_plugin_version = API_VERSION;

static uint64_t total;
static struct {
    uint64_t lo, hi, count;
} ranges[MAX_RANGES];
static size_t n_ranges;

/* The range holding `pc`, or NULL. */
static uint64_t *range_counter(uint64_t pc)
{
    size_t i;
    for (i = 0; i < n_ranges; i++) {
        if (pc >= ranges[i].lo && pc < ranges[i].hi) {
            return &ranges[i].count;
        }
    }
    return NULL;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb), i;
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, n);
    for (i = 0; n_ranges > 0 && i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t *c = range_counter(qemu_plugin_insn_vaddr(insn));
        if (c != NULL) {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, c, 1);
        }
    }
}

static void at_exit_report(qemu_plugin_id_t id, void *unused)
{
    char line[96];
    size_t i;
    (void)id;
    (void)unused;
    snprintf(line, sizeof line, "insns=%llu\n", (unsigned long long)total);
    qemu_plugin_outs(line);
    for (i = 0; i < n_ranges; i++) {
        snprintf(line, sizeof line, "range 0x%llx 0x%llx %llu\n", (unsigned long long)ranges[i].lo,
                 (unsigned long long)ranges[i].hi, (unsigned long long)ranges[i].count);
        qemu_plugin_outs(line);
    }
}

/* `range=LO:HI` into the next slot; 0 on success. */
static int parse_range(const char *arg)
{
    char *end;
    uint64_t lo, hi;
    if (strncmp(arg, "range=", 6) != 0 || n_ranges == MAX_RANGES) {
        return -1;
    }
    lo = strtoull(arg + 6, &end, 0);
    if (*end != ':') {
        return -1;
    }
    hi = strtoull(end + 1, &end, 0);
    if (*end != '\0' || hi <= lo) {
        return -1;
    }
    ranges[n_ranges].lo = lo;
    ranges[n_ranges].hi = hi;
    n_ranges++;
    return 0;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t *info, int argc,
                                                               char **argv)
{
    int i;
    (void)info;
    for (i = 0; i < argc; i++) {
        if (parse_range(argv[i]) != 0) {
            fprintf(stderr, "icount: bad argument `%s` (want range=LO:HI, at most %d)\n", argv[i],
                    MAX_RANGES);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_exit_report, NULL);
    return 0;
}
